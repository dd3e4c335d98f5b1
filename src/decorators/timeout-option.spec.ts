import 'reflect-metadata';
import { DurableUsageError } from '../errors/durable-usage.error';
import { DurableStep } from './durable-step.decorator';
import { DurableTransaction } from './durable-transaction.decorator';
import { IdempotentCommand } from './idempotent-command.decorator';

/** A call's `timeoutMs` is checked where the method is declared, naming the method and the field. */
describe('timeoutMs of durable calls', () => {
  const declare = (decorator: MethodDecorator) => () => {
    class Service {
      async call() {
        return 1;
      }
    }
    const descriptor = Object.getOwnPropertyDescriptor(Service.prototype, 'call')!;
    decorator(Service.prototype, 'call', descriptor);
  };

  it.each([
    ['@DurableStep', (t: unknown) => DurableStep({ timeoutMs: t as number })],
    ['@DurableTransaction', (t: unknown) => DurableTransaction({ timeoutMs: t as number })],
    [
      '@IdempotentCommand',
      (t: unknown) => IdempotentCommand({ name: 'send', inDoubt: 'retry-with-key', timeoutMs: t as number }),
    ],
  ])('%s refuses a negative or non-numeric timeoutMs and takes 0 (none)', (what, make) => {
    for (const bad of [-1, Number.NaN, '100', Infinity]) {
      expect(declare(make(bad))).toThrow(DurableUsageError);
      expect(declare(make(bad))).toThrow(/Service\.call.*timeoutMs must be a number of milliseconds >= 0/);
    }
    expect(declare(make(0))).not.toThrow();
    expect(declare(make(250))).not.toThrow();
    expect(what).toMatch(/^@/);
  });
});
