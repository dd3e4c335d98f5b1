import { currentRun, DurableStep, IdempotentCommand } from '../index';
import type {
  CommandContext,
  DurableStepOptions,
  IdempotentCommandOptions,
  LookupContext,
  LookupResult,
  RunContext,
} from '../index';

/**
 * A `@DurableStep` with these options, made at run time (the options come from the wrapper's caller):
 * `step(args, body)` is one step call; `args` are what its fingerprint compares on replay, `body` runs
 * only when the step is not recorded. Outside a run it is `body()`.
 */
export function stepCaller(
  options: DurableStepOptions,
): (args: unknown, body: () => unknown) => Promise<unknown> {
  class AgentsStep {
    constructor(private readonly body: () => unknown) {}
    call(_args: unknown): unknown {
      return this.body();
    }
  }
  decorate(AgentsStep.prototype, 'call', DurableStep(options));
  return (args, body) => Promise.resolve(new AgentsStep(body).call(args));
}

/** The in-doubt lookup of a command made at run time. */
export type CommandLookupFn = (idempotencyKey: string, context?: LookupContext) => Promise<LookupResult>;

/**
 * An `@IdempotentCommand` with these options, made at run time: `command(args, body)` is one command
 * call (reserved, sent with its key, recorded; the recorded outcome on replay).
 */
export function commandCaller(
  options: IdempotentCommandOptions,
  lookup?: CommandLookupFn,
): (args: unknown, body: (ctx: CommandContext | undefined) => unknown) => Promise<unknown> {
  class AgentsCommand {
    constructor(private readonly body: (ctx: CommandContext | undefined) => unknown) {}
    call(_args: unknown, ctx?: CommandContext): unknown {
      return this.body(ctx);
    }
  }
  if (lookup)
    Object.defineProperty(AgentsCommand.prototype, 'lookupCommand', {
      value: (_command: string, key: string, context?: LookupContext) => lookup(key, context),
    });
  decorate(AgentsCommand.prototype, 'call', IdempotentCommand(options));
  return (args, body) => Promise.resolve(new AgentsCommand(body).call(args));
}

function decorate(proto: object, key: string, decorator: MethodDecorator): void {
  const descriptor = Object.getOwnPropertyDescriptor(proto, key)!;
  const out = decorator(proto, key, descriptor) ?? descriptor;
  Object.defineProperty(proto, key, out);
}

/**
 * The engine stops a run by aborting its signal with the stop's error (a lost lease, a cancel, a
 * drain, a park, non-determinism). The Agents SDK turns most errors a tool throws into a message for
 * the model: an engine stop must never go that way. A tool call that ended while its run was stopping
 * throws the stop, and the next model call throws it before anything is asked.
 */
export function checkRunning(ctx: RunContext): void {
  const signal = ctx.signal;
  if (signal.aborted) throw signal.reason ?? new Error('the run stopped');
}

/**
 * The caller's abort signal and the run's (fires when this worker loses the run, or it is cancelled;
 * its reason is the engine's error, which the SDK then rethrows instead of handing it to the model).
 */
export function linkedSignal(
  signal: AbortSignal | undefined,
  ctx: RunContext,
  own?: AbortSignal,
): AbortSignal {
  const signals = [signal, own ?? currentRun()?.signal ?? ctx.signal].filter((s): s is AbortSignal => !!s);
  return signals.length === 1 ? signals[0] : AbortSignal.any(signals);
}
