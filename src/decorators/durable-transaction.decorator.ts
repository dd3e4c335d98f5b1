import { TRANSACTION_METADATA } from '../durable-execution.constants';
import type {
  DurableTransactionIsolation,
  DurableTransactionOptions,
  TransactionMetadata,
} from '../interfaces/transaction.interface';
import { handed } from '../engine/handed';
import { runStorage } from '../engine/run-storage';
import { DurableUsageError } from '../errors/durable-usage.error';
import { plainTransaction, transactionStorage } from '../store/transactions/transaction-session';
import { timeoutProblem } from './timeout-option';

const ISOLATIONS: DurableTransactionIsolation[] = ['read committed', 'repeatable read', 'serializable'];

/** What is wrong with the options, naming the field (checked where the method is declared). */
function optionsProblem(o: DurableTransactionOptions): string | undefined {
  if (!o || typeof o !== 'object') return `takes { name, isolation, ... }, got ${JSON.stringify(o)}`;
  if (o.name !== undefined && (typeof o.name !== 'string' || !o.name || o.name.length > 200))
    return `name must be a non-empty string of at most 200 characters, got ${JSON.stringify(o.name)}`;
  if (o.isolation !== undefined && !ISOLATIONS.includes(o.isolation))
    return `isolation must be one of ${ISOLATIONS.map((i) => `'${i}'`).join(', ')}, got ${JSON.stringify(o.isolation)}`;
  if (o.dataSource !== undefined && (typeof o.dataSource !== 'string' || !o.dataSource))
    return `dataSource must be the name of a TypeORM DataSource, got ${JSON.stringify(o.dataSource)}`;
  return timeoutProblem(o.timeoutMs);
}

/**
 * Makes a provider method a durable transaction: inside a run its body runs in ONE PostgreSQL
 * transaction, and the step's checkpoint commits in that same transaction, fenced by the run's lease
 * (its worker and epoch). So the body's writes happen exactly once: a crash before the commit leaves
 * nothing (the next claim runs it again), a worker frozen past its lease commits nothing, and after the
 * commit a replay returns the recorded result. The body reaches the transaction through the injectable
 * `DurableTransactionHost` (`manager`, a TypeORM EntityManager; `client`, the pg client). Outside a run,
 * or inside a step's body, the method runs in a plain transaction (no checkpoint); inside another
 * durable transaction it joins that one. Results must be plain JSON.
 * @example
 * ```ts
 * constructor(private readonly tx: DurableTransactionHost) {}
 * @DurableTransaction()
 * async activate(accountId: string) {
 *   await this.tx.manager.getRepository(Account).update(accountId, { active: true });
 * }
 * ```
 */
export function DurableTransaction(options: DurableTransactionOptions = {}): MethodDecorator {
  const problem = optionsProblem(options);
  return (target, key, descriptor: PropertyDescriptor) => {
    const declaredAt = `${target.constructor.name}.${String(key)}`;
    if (problem) throw new DurableUsageError(`@DurableTransaction on ${declaredAt}: ${problem}`);
    const original = descriptor.value as (...args: unknown[]) => unknown;
    const meta: TransactionMetadata = {
      name: options.name ?? declaredAt,
      dataSource: options.dataSource,
      isolation: options.isolation ?? 'read committed',
      retry: options.retry,
      timeoutMs: options.timeoutMs,
      declaredAt,
    };
    const wrapped = function (this: unknown, ...args: unknown[]) {
      const frame = runStorage.getStore();
      const call = () => original.apply(this, args);
      if (transactionStorage.getStore()?.open) return call(); // joins the transaction it is called in
      if (!frame || frame.step) return plainTransaction(meta, call);
      return handed(frame.host.executeTransaction(meta, call, args));
    };
    Object.defineProperty(wrapped, 'name', { value: original.name });
    Reflect.defineMetadata(TRANSACTION_METADATA, meta, wrapped);
    descriptor.value = wrapped;
    return descriptor;
  };
}
