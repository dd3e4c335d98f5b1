import type { FunctionTool, Tool } from '@openai/agents';
import type {
  CommandContext,
  InDoubtPolicy,
  LookupContext,
  LookupResult,
  RetryPolicy,
  RunContext,
} from '../index';
import { checkRunning } from '../agent-shared/calls';
import { commandsByName, toolCaller, toolCommandContexts } from '../agent-shared/tools';
import type { ToolCall, ToolValues } from '../agent-shared/tools';
import { linkedSignal } from './calls';
import { fromJsonValue, toOrderedJson } from './values';

/** How a function tool with side effects runs as a command (`@IdempotentCommand` options, per tool). */
export interface AgentToolCommandOptions {
  /**
   * What settles a call whose outcome a crash hid (default: the `inDoubt` of the options, else
   * `'manual'`): `'lookup'` asks the target by key through `lookup`, `'retry-with-key'` sends it again
   * with the same key (`agentToolCommandContext(details).idempotencyKey`), `'manual'` parks the run.
   */
  inDoubt?: InDoubtPolicy;
  /** For `inDoubt: 'lookup'`: did the target apply the call with this key, and with which result? */
  lookup?: (idempotencyKey: string, context?: LookupContext) => Promise<LookupResult>;
  /** Park the run before the call until `RunRepository.approve` / `reject`; or a predicate on the parsed arguments. */
  requiresApproval?: boolean | ((input: any) => boolean);
  /** In-claim retries of a call that threw (same key every time). Default: 1 attempt. */
  retry?: RetryPolicy;
  /**
   * Whether an error the tool's `invoke` threw says the target refused the call (did nothing): then it
   * is recorded. A `NonRetryableError` or an error with `retryable: false` always is. Any other error
   * leaves the outcome unknown: the call is in doubt and settled by `inDoubt`.
   */
  definiteError?: (error: unknown) => boolean;
}

/** Options of `durableAgentTools` (and of `durableAgent`, for the tools of every agent it reaches). */
export interface DurableAgentToolsOptions {
  /**
   * The function tools with side effects, by name: each call runs as an `@IdempotentCommand` named
   * after the tool and keyed by the model's call id (`run_<id>:step_<n>:tool_call_<callId>:<tool>`),
   * applied at most once however often the run is replayed or taken over.
   */
  commands?: string[] | { [name: string]: AgentToolCommandOptions | undefined };
  /** The in-doubt policy of commands given by name only (default `'manual'`). */
  inDoubt?: InDoubtPolicy;
  /** The retry policy of the other function tools, each call a `tool` step named `tool:<name>`. */
  retry?: RetryPolicy;
  /** Function tools left as they are (run again on every replay): for tools that only compute. */
  plain?: string[];
}

type Invoke = FunctionTool['invoke'];

/**
 * Inside a command tool's `execute(args, runContext, details)`: the command's context
 * (`idempotencyKey`, the claim's fencing token `fence`, `signal`). Send the key to the target so that a
 * call sent again is applied once. Undefined outside a run and in tools that are not commands.
 */
export function agentToolCommandContext(details: object | undefined): CommandContext | undefined {
  return details ? toolCommandContexts.get(details) : undefined;
}

/**
 * The function tools of an OpenAI Agents SDK agent made durable inside a run: a tool named in
 * `commands` runs as an exactly-once command keyed by the model's call id; every other function tool
 * runs as a recorded `tool` step (its output returned from the record on a replay). Parallel calls of
 * one turn take their positions in the order the runner invokes them. What the SDK makes of a tool's
 * error (a message for the model, by the tool's `errorFunction`) is recorded as its output; an error
 * of the engine (the run lost its lease, was cancelled, parked) never reaches the model. Hosted tools,
 * computer, shell and apply-patch tools are left as they are. Outside a run the tools run as they are.
 */
export function durableAgentTools<T extends Tool<any>>(
  ctx: RunContext,
  tools: readonly T[],
  options: DurableAgentToolsOptions = {},
): T[] {
  if (!ctx || typeof ctx.uuid !== 'function')
    throw new TypeError(
      "durableAgentTools takes the run's context first: durableAgentTools(ctx, tools, options)",
    );
  const commands = commandOptions(options);
  for (const name of Object.keys(commands))
    if (!tools.some((t) => t.type === 'function' && t.name === name))
      throw new TypeError(
        `durableAgentTools: commands name "${name}", which is not one of the function tools`,
      );
  return wrapTools(ctx, tools, options, commands);
}

/** The tools wrapped (`durableAgent` checks the command names against all its agents' tools). */
export function wrapTools<T extends Tool<any>>(
  ctx: RunContext,
  tools: readonly T[],
  options: DurableAgentToolsOptions,
  commands = commandOptions(options),
): T[] {
  const plain = new Set(options.plain ?? []);
  return tools.map((t) => {
    if (t.type !== 'function' || plain.has(t.name)) return t;
    const tool = t as FunctionTool<any, any, any>;
    const invoke = tool.invoke.bind(tool) as Invoke;
    const durable = durableInvoke(
      ctx,
      invoke,
      toolCaller(tool.name, commands[tool.name], options, AGENT_TOOL_VALUES),
    );
    // The tool as the SDK made it (symbol-keyed metadata too), with the durable invoke.
    const copy = Object.create(
      Object.getPrototypeOf(tool),
      Object.getOwnPropertyDescriptors(tool),
    ) as typeof tool;
    copy.invoke = durable;
    return copy as unknown as T;
  });
}

export function commandOptions(options: DurableAgentToolsOptions): Record<string, AgentToolCommandOptions> {
  return commandsByName<AgentToolCommandOptions>(options.commands);
}

const AGENT_TOOL_VALUES: ToolValues = {
  store: toOrderedJson,
  load: fromJsonValue,
  approvalInput: (input) => parsed(String(input)),
  host: 'Agents',
};

/** A function tool's `invoke` as one durable call: recorded arguments the model's call id and the arguments. */
function durableInvoke(ctx: RunContext, invoke: Invoke, call: ToolCall): Invoke {
  return async (runContext, input, details) => {
    const args = { toolCallId: details?.toolCall?.callId ?? null, input };
    const result = await call(args, (cmd) => {
      const d = { ...details, signal: linkedSignal(details?.signal, ctx, cmd?.signal) };
      if (cmd) toolCommandContexts.set(d, cmd);
      return invoke(runContext, input, d);
    });
    checkRunning(ctx);
    return result;
  };
}

function parsed(input: string): unknown {
  try {
    return JSON.parse(input);
  } catch {
    return input;
  }
}
