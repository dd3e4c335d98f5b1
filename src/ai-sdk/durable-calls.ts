import { DurableStep, IdempotentCommand } from '../index';
import type {
  CommandContext,
  DurableStepOptions,
  IdempotentCommandOptions,
  LookupContext,
  LookupResult,
} from '../index';

/**
 * A `@DurableStep` with these options, made at run time (the options come from the wrapper's caller):
 * `step(args, body)` is one step call; `args` are what its fingerprint compares on replay, `body` runs
 * only when the step is not recorded. Outside a run it is `body()`.
 */
export function stepCaller(
  options: DurableStepOptions,
): (args: unknown, body: () => unknown) => Promise<unknown> {
  class AiStep {
    constructor(private readonly body: () => unknown) {}
    call(_args: unknown): unknown {
      return this.body();
    }
  }
  decorate(AiStep.prototype, 'call', DurableStep(options));
  return (args, body) => Promise.resolve(new AiStep(body).call(args));
}

/** The in-doubt lookup of a command made at run time. */
export type CommandLookupFn = (idempotencyKey: string, context?: LookupContext) => Promise<LookupResult>;

/**
 * An `@IdempotentCommand` with these options, made at run time: `command(args, body)` is one command
 * call (reserved, sent with its key, recorded; the recorded outcome on replay). `lookup` answers an
 * in-doubt command under `inDoubt: 'lookup'`.
 */
export function commandCaller(
  options: IdempotentCommandOptions,
  lookup?: CommandLookupFn,
): (args: unknown, body: (ctx: CommandContext | undefined) => unknown) => Promise<unknown> {
  class AiCommand {
    constructor(private readonly body: (ctx: CommandContext | undefined) => unknown) {}
    call(_args: unknown, ctx?: CommandContext): unknown {
      return this.body(ctx);
    }
  }
  if (lookup)
    Object.defineProperty(AiCommand.prototype, 'lookupCommand', {
      value: (_command: string, key: string, context?: LookupContext) => lookup(key, context),
    });
  decorate(AiCommand.prototype, 'call', IdempotentCommand(options));
  return (args, body) => Promise.resolve(new AiCommand(body).call(args));
}

function decorate(proto: object, key: string, decorator: MethodDecorator): void {
  const descriptor = Object.getOwnPropertyDescriptor(proto, key)!;
  const out = decorator(proto, key, descriptor) ?? descriptor;
  Object.defineProperty(proto, key, out);
}
