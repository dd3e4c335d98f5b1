import { COMMAND_METADATA } from '../durable-execution.constants';
import type {
  CommandLookup,
  CommandMetadata,
  IdempotentCommandOptions,
} from '../interfaces/command.interface';
import { CommandInStepError } from '../errors/command-in-step.error';
import { timeoutProblem } from './timeout-option';
import { DurableUsageError } from '../errors/durable-usage.error';
import { handed } from '../engine/handed';
import { runStorage } from '../engine/run-storage';

/** What is wrong with the options, naming the field (checked where the method is declared). */
function optionsProblem(o: unknown): string | undefined {
  if (!o || typeof o !== 'object') return `takes { name, inDoubt, ... }, got ${JSON.stringify(o)}`;
  const { name, inDoubt } = o as { name?: unknown; inDoubt?: unknown };
  if (typeof name !== 'string' || !name || name.length > 200)
    return `name must be a non-empty string of at most 200 characters, got ${JSON.stringify(name)}`;
  if (!['lookup', 'retry-with-key', 'manual'].includes(inDoubt as string))
    return `inDoubt must be 'lookup', 'retry-with-key' or 'manual', got ${JSON.stringify(inDoubt)}`;
  const { key, timeoutMs } = o as { key?: unknown; timeoutMs?: unknown };
  if (key !== undefined && typeof key !== 'function')
    return `key must be a function of the arguments returning the command's key, got ${typeof key}`;
  return timeoutProblem(timeoutMs);
}

/**
 * Makes a provider method an external side effect that is safe to attempt again. Inside a run it gets a
 * deterministic key as its second argument (`{ idempotencyKey, signal }`), is reserved before and
 * recorded after the call, and on replay returns the stored result without calling. A crash that hides
 * the outcome is settled by `inDoubt`. Outside a run it is the plain method.
 * @example
 * ```ts
 * @IdempotentCommand({ name: 'charge_card', inDoubt: 'lookup' })
 * async chargeCard(args: ChargeArgs, { idempotencyKey }: CommandContext) { return this.gateway.charge(args, idempotencyKey); }
 * ```
 */
export function IdempotentCommand<A = any>(options: IdempotentCommandOptions<A>): MethodDecorator {
  const problem = optionsProblem(options);
  return (target, key, descriptor: PropertyDescriptor) => {
    if (problem)
      throw new DurableUsageError(
        `@IdempotentCommand on ${target.constructor.name}.${String(key)}: ${problem}`,
      );
    const original = descriptor.value as (...args: unknown[]) => unknown;
    const meta: CommandMetadata = { ...options, declaredAt: `${target.constructor.name}.${String(key)}` };
    const wrapped = function (this: unknown, ...args: unknown[]) {
      const frame = runStorage.getStore();
      if (!frame) return original.apply(this, args);
      // Inside a step (or another command's body) a command would have no stable key and repeat on
      // every retry. The run is stopped: catching the error cannot turn it into a success.
      if (frame.step)
        return handed(Promise.reject(frame.host.misuse(new CommandInStepError(meta.name, frame.step.name))));
      const self = this as Partial<CommandLookup>;
      const lookup = typeof self.lookupCommand === 'function' ? self.lookupCommand.bind(self) : undefined;
      return handed(
        frame.host.executeCommand(meta, args[0], (ctx) => original.call(this, args[0], ctx), lookup),
      );
    };
    Object.defineProperty(wrapped, 'name', { value: original.name });
    Reflect.defineMetadata(COMMAND_METADATA, meta, wrapped);
    descriptor.value = wrapped;
    return descriptor;
  };
}
