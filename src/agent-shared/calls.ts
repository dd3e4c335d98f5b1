import { DurableStep, IdempotentCommand } from '../index';
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
 * only when the step is not recorded. Outside a run it is `body()`. `host` names the class the step is
 * declared on (as the engine's messages show it).
 */
export function stepCaller(
  options: DurableStepOptions,
  host: string,
): (args: unknown, body: () => unknown) => Promise<unknown> {
  class Step {
    constructor(private readonly body: () => unknown) {}
    call(_args: unknown): unknown {
      return this.body();
    }
  }
  Object.defineProperty(Step, 'name', { value: host });
  decorate(Step.prototype, 'call', DurableStep(options));
  return (args, body) => Promise.resolve(new Step(body).call(args));
}

/** The in-doubt lookup of a command made at run time. */
export type CommandLookupFn = (idempotencyKey: string, context?: LookupContext) => Promise<LookupResult>;

/**
 * An `@IdempotentCommand` with these options, made at run time: `command(args, body)` is one command
 * call (reserved, sent with its key, recorded; the recorded outcome on replay). `lookup` answers an
 * in-doubt command under `inDoubt: 'lookup'`. `host` names the class, as in `stepCaller`.
 */
export function commandCaller(
  options: IdempotentCommandOptions,
  lookup: CommandLookupFn | undefined,
  host: string,
): (args: unknown, body: (ctx: CommandContext | undefined) => unknown) => Promise<unknown> {
  class Command {
    constructor(private readonly body: (ctx: CommandContext | undefined) => unknown) {}
    call(_args: unknown, ctx?: CommandContext): unknown {
      return this.body(ctx);
    }
  }
  Object.defineProperty(Command, 'name', { value: host });
  if (lookup)
    Object.defineProperty(Command.prototype, 'lookupCommand', {
      value: (_command: string, key: string, context?: LookupContext) => lookup(key, context),
    });
  decorate(Command.prototype, 'call', IdempotentCommand(options));
  return (args, body) => Promise.resolve(new Command(body).call(args));
}

function decorate(proto: object, key: string, decorator: MethodDecorator): void {
  const descriptor = Object.getOwnPropertyDescriptor(proto, key)!;
  const out = decorator(proto, key, descriptor) ?? descriptor;
  Object.defineProperty(proto, key, out);
}

/**
 * The engine stops a run by aborting its signal with the stop's error (a lost lease, a cancel, a
 * drain, a park, non-determinism, a misuse). An agent SDK turns most errors a tool throws into a
 * message for the model: an engine stop must never go that way. A tool call that ended while its run
 * was stopping rethrows the stop, and the next model call throws it before anything is asked.
 */
export function checkRunning(ctx: RunContext): void {
  const signal = ctx.signal;
  if (signal.aborted) throw signal.reason ?? new Error('the run stopped');
}
