import { STEP_METADATA } from '../durable-execution.constants';
import type { DurableStepOptions, StepMetadata } from '../interfaces/step-options.interface';
import { handed } from '../engine/handed';
import { runStorage } from '../engine/run-storage';
import { DurableUsageError } from '../errors/durable-usage.error';
import { timeoutProblem } from './timeout-option';

/**
 * Makes a provider method a durable step: inside a run its result is checkpointed, and on replay the
 * stored result is returned without calling the method. Outside a run it is the plain method.
 * Results must be plain JSON.
 * @example
 * ```ts
 * @DurableStep({ kind: 'model' })
 * async parseRequest(text: string) { return this.llm.complete(text); }
 * ```
 */
export function DurableStep(options: DurableStepOptions = {}): MethodDecorator {
  return (target, key, descriptor: PropertyDescriptor) => {
    const original = descriptor.value as (...args: unknown[]) => unknown;
    const declaredAt = `${target.constructor.name}.${String(key)}`;
    const meta: StepMetadata = {
      name: options.name ?? declaredAt,
      kind: options.kind ?? 'compute',
      retry: options.retry,
      timeoutMs: options.timeoutMs,
      budget: options.budget,
      declaredAt,
    };
    const timeout = timeoutProblem(options.timeoutMs);
    if (timeout) throw new DurableUsageError(`@DurableStep on ${declaredAt}: ${timeout}`);
    if (options.budget !== undefined && (typeof options.budget !== 'string' || !options.budget))
      throw new DurableUsageError(
        `@DurableStep on ${declaredAt}: budget must be the name of a budget in the module's budgets`,
      );
    const wrapped = function (this: unknown, ...args: unknown[]) {
      const frame = runStorage.getStore();
      if (!frame || frame.step) return original.apply(this, args);
      return handed(frame.host.executeStep(meta, () => original.apply(this, args), args));
    };
    Object.defineProperty(wrapped, 'name', { value: original.name });
    Reflect.defineMetadata(STEP_METADATA, meta, wrapped);
    descriptor.value = wrapped;
    return descriptor;
  };
}
