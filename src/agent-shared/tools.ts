import type { CommandContext, IdempotentCommandOptions, InDoubtPolicy, RetryPolicy } from '../index';
import { commandCaller, stepCaller } from './calls';
import type { CommandLookupFn } from './calls';

/**
 * How one tool with side effects runs as a command: the fields of the subpaths' public
 * `ToolCommandOptions` (ai-sdk) and `AgentToolCommandOptions` (openai-agents), which document them.
 */
export type ToolCommandSettings = Partial<
  Pick<IdempotentCommandOptions, 'inDoubt' | 'retry' | 'definiteError'>
> & {
  lookup?: CommandLookupFn;
  requiresApproval?: boolean | ((input: any) => boolean);
};

/** The options of a tools wrapper that hold for every tool: the `inDoubt` of commands, the `retry` of steps. */
export interface ToolDefaults {
  inDoubt?: InDoubtPolicy;
  retry?: RetryPolicy;
}

/** How a subpath stores what its tools return, and reads what a call recorded. */
export interface ToolValues {
  /** A tool's result (or a lookup's) as stored: JSON data. */
  store(value: unknown): unknown;
  /** What `store` made, rebuilt for the SDK (from the record on a replay). */
  load(json: unknown): unknown;
  /** The recorded `input` of a call as a `requiresApproval` predicate takes it. */
  approvalInput(input: unknown): unknown;
  /** The class name the calls are declared on (`<host>Command`, `<host>Step`), as the engine's messages show it. */
  host: string;
}

/**
 * One call of a durable tool: `args` are the recorded arguments (`{ toolCallId, input }`), `body` runs
 * the tool (with the command's context for a command, undefined for a step or outside a run) when the
 * call is not recorded. Returns the result rebuilt by `ToolValues.load`.
 */
export type ToolCall = (
  args: unknown,
  body: (cmd: CommandContext | undefined) => unknown,
) => Promise<unknown>;

/**
 * The commands of a tools wrapper's options by name: names alone (each with no options of its own),
 * or options per name (a name whose options are undefined is not a command).
 */
export function commandsByName<O extends object>(
  commands: readonly string[] | { readonly [name: string]: O | undefined } | undefined,
): Record<string, O> {
  if (!commands) return {};
  if (Array.isArray(commands)) return Object.fromEntries(commands.map((n: string) => [n, {} as O]));
  return Object.fromEntries(Object.entries(commands).filter(([, v]) => v) as Array<[string, O]>);
}

/**
 * The durable call of the tool `name`: with `command` settings an exactly-once `@IdempotentCommand`
 * named after the tool (its in-doubt policy `command.inDoubt`, else `defaults.inDoubt`, else
 * `'manual'`), else a recorded `tool` step named `tool:<name>` with `defaults.retry`.
 */
export function toolCaller(
  name: string,
  command: ToolCommandSettings | undefined,
  defaults: ToolDefaults,
  values: ToolValues,
): ToolCall {
  if (!command) {
    const step = stepCaller(
      { name: `tool:${name}`, kind: 'tool', retry: defaults.retry },
      `${values.host}Step`,
    );
    return async (args, body) =>
      values.load(await step(args, async () => values.store(await body(undefined)) ?? null));
  }
  const approval = command.requiresApproval;
  const call = commandCaller(
    {
      name,
      inDoubt: command.inDoubt ?? defaults.inDoubt ?? 'manual',
      retry: command.retry,
      definiteError: command.definiteError,
      requiresApproval:
        typeof approval === 'function'
          ? (args: { input: unknown }) => approval(values.approvalInput(args.input))
          : approval,
    },
    command.lookup &&
      (async (key, context) => {
        const found = await command.lookup!(key, context);
        return found.found ? { found: true, result: values.store(found.result) ?? null } : found;
      }),
    `${values.host}Command`,
  );
  return async (args, body) =>
    values.load(await call(args, async (cmd) => values.store(await body(cmd)) ?? null));
}

/** The command context of each call's options object (`toolCommandContext`, `agentToolCommandContext`). */
export const toolCommandContexts = new WeakMap<object, CommandContext>();
