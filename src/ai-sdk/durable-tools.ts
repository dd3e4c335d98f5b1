import type { ToolExecutionOptions, ToolSet } from 'ai';
import type {
  CommandContext,
  InDoubtPolicy,
  LookupContext,
  LookupResult,
  RetryPolicy,
  RunContext,
} from '../index';
import { commandsByName, toolCaller, toolCommandContexts } from '../agent-shared/tools';
import type { ToolCall, ToolValues } from '../agent-shared/tools';
import { fromAiJson, toAiJson } from './ai-values';

/** How a tool with side effects runs as a command (`@IdempotentCommand` options, per tool). */
export interface ToolCommandOptions {
  /**
   * What settles a call whose outcome a crash hid (default: the `inDoubt` of `durableTools`' options,
   * else `'manual'`): `'lookup'` asks the target by key through `lookup`, `'retry-with-key'` sends it
   * again with the same key (`toolCommandContext(options).idempotencyKey`), `'manual'` parks the run for
   * an operator.
   */
  inDoubt?: InDoubtPolicy;
  /** For `inDoubt: 'lookup'`: did the target apply the call with this key, and with which result? */
  lookup?: (idempotencyKey: string, context?: LookupContext) => Promise<LookupResult>;
  /** Park the run before the call until `RunRepository.approve` / `reject`; or a predicate on the input. */
  requiresApproval?: boolean | ((input: any) => boolean);
  /** In-claim retries of a call that threw (same key every time). Default: 1 attempt. */
  retry?: RetryPolicy;
  /**
   * Whether an error the tool threw says the target refused the call (did nothing): then it is recorded
   * and handed to the model as the tool's error. A `NonRetryableError` or an error with
   * `retryable: false` always is. Any other error leaves the outcome unknown: the call is in doubt and
   * settled by `inDoubt` before the model sees anything.
   */
  definiteError?: (error: unknown) => boolean;
}

/** Options of `durableTools`. */
export interface DurableToolsOptions<T extends ToolSet = ToolSet> {
  /**
   * The tools with side effects: each call runs as an `@IdempotentCommand` named after the tool and
   * keyed by the model's `toolCallId` (`run_<id>:step_<n>:tool_call_<toolCallId>:<tool>`), applied at
   * most once however often the run is replayed or taken over. Names, or options per name.
   */
  commands?: Array<keyof T & string> | { [K in keyof T & string]?: ToolCommandOptions };
  /** The in-doubt policy of commands given by name only (default `'manual'`). */
  inDoubt?: InDoubtPolicy;
  /**
   * The retry policy of the other (read-only) tools, each call a `tool` step named `tool:<name>`
   * (merged over the module's `defaultRetry`). A tool's own error, once its retries are spent, is
   * recorded and handed to the model as the AI SDK does; on a replay the model gets the same error.
   */
  retry?: RetryPolicy;
  /** Tools left as they are (run again on every replay): for tools that only compute from their input. */
  plain?: Array<keyof T & string>;
}

/**
 * Inside a command tool's `execute(input, options)`: the command's context (`idempotencyKey`, the
 * claim's fencing token `fence`, `signal`). Send the key to the target so that a call sent again
 * (`retry-with-key`) is applied once, and the token to a target that checks it (`fenceHeaders`).
 * Undefined outside a run and in tools that are not commands.
 */
export function toolCommandContext(options: ToolExecutionOptions): CommandContext | undefined {
  return toolCommandContexts.get(options);
}

/**
 * The AI SDK's tools made durable inside a run: pass what it returns to `generateText` / `streamText`.
 * A tool named in `commands` runs as an exactly-once command keyed by the model's `toolCallId`; every
 * other tool with an `execute` runs as a recorded `tool` step (its result returned from the record on
 * a replay). Parallel tool calls of one model turn are positioned in the order the SDK calls them and
 * replay in that order. A tool's own error is recorded and handed to the model as the SDK does; an
 * error of the engine (the run lost its lease, was cancelled, parked) never reaches the model: the next
 * model call rethrows it. Outside a run the tools run as they are.
 */
export function durableTools<T extends ToolSet>(
  ctx: RunContext,
  tools: T,
  options: DurableToolsOptions<T> = {},
): T {
  if (!ctx || typeof ctx.uuid !== 'function')
    throw new TypeError("durableTools takes the run's context first: durableTools(ctx, tools, options)");
  const commands = commandsByName<ToolCommandOptions>(options.commands);
  const plain = new Set<string>(options.plain ?? []);
  for (const name of Object.keys(commands))
    if (!(name in tools))
      throw new TypeError(`durableTools: commands name "${name}", which is not one of the tools`);
  const out: Record<string, unknown> = {};
  for (const [name, tool] of Object.entries(tools)) {
    const execute = (tool as { execute?: unknown }).execute;
    if (typeof execute !== 'function' || plain.has(name)) {
      out[name] = tool;
      continue;
    }
    const run = execute.bind(tool) as Execute;
    const call = toolCaller(name, commands[name], options, AI_TOOL_VALUES);
    out[name] = { ...tool, execute: durableExecute(run, call) };
  }
  return out as T;
}

type Execute = (input: unknown, options: ToolExecutionOptions) => unknown;

const AI_TOOL_VALUES: ToolValues = {
  store: toAiJson,
  load: fromAiJson,
  approvalInput: fromAiJson,
  host: 'Ai',
};

/** A tool's `execute` as one durable call: the recorded arguments are the model's `toolCallId` and the input. */
function durableExecute(run: Execute, call: ToolCall): Execute {
  return async (input, options) =>
    call({ toolCallId: options.toolCallId, input: toAiJson(input) ?? null }, (cmd) => {
      if (!cmd) return lastValue(run(input, options));
      const o2 = { ...options, abortSignal: cmd.signal ?? options.abortSignal };
      toolCommandContexts.set(o2, cmd);
      return lastValue(run(input, o2));
    });
}

/** A tool's `execute` may return a value, a promise, or an async iterable of preliminary outputs: the last one. */
async function lastValue(v: unknown): Promise<unknown> {
  const r = await v;
  if (r && typeof r === 'object' && Symbol.asyncIterator in r) {
    let last: unknown = undefined;
    for await (const x of r as AsyncIterable<unknown>) last = x;
    return last;
  }
  return r;
}
