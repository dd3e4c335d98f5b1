import { AsyncLocalStorage } from 'node:async_hooks';
import type { PoolClient } from 'pg';
import type { EntityManager, QueryRunner } from 'typeorm';
import { DurableUsageError } from '../../errors/durable-usage.error';
import type { TransactionMetadata } from '../../interfaces/transaction.interface';

/**
 * One open transaction of a `@DurableTransaction` body (durable or plain): the TypeORM QueryRunner that
 * holds it and its pg client. `open` turns false when it commits, rolls back or is abandoned: a body
 * (or something it left running) that reaches for it afterwards gets a clear error, never another
 * transaction's connection.
 * @internal
 */
export class TransactionSession {
  open = true;
  /** Called once when it ends (frees its slot). */
  onClose?: () => void;
  constructor(
    readonly queryRunner: QueryRunner,
    readonly client: PoolClient,
    /** What the body is (for errors): `transaction Accounts.activate`. */
    readonly label: string,
  ) {}

  get manager(): EntityManager {
    return this.queryRunner.manager;
  }
}

/** The transaction the code runs in (set around a `@DurableTransaction` body). @internal */
export const transactionStorage = new AsyncLocalStorage<TransactionSession>();

/** The open transaction of the body this code runs in; a typed error naming the fix otherwise. @internal */
export function currentTransaction(what: string): TransactionSession {
  const session = transactionStorage.getStore();
  if (!session)
    throw new DurableUsageError(
      `DurableTransactionHost.${what} was read outside a @DurableTransaction method's body: decorate the method ` +
        'that uses it with @DurableTransaction(), and read it inside that call (not in a constructor or a callback that outlives it)',
    );
  if (!session.open)
    throw new DurableUsageError(
      `DurableTransactionHost.${what} was read after the ${session.label} ended (committed, rolled back or timed out): ` +
        'something the body started without awaiting it (a timer, an un-awaited promise) outlived it; await it inside the body',
    );
  return session;
}

/** Runs a body in a plain transaction (outside a run, or inside a step's body). @internal */
export type PlainTransactionRunner = (meta: TransactionMetadata, call: () => unknown) => Promise<unknown>;

let plainRunner: PlainTransactionRunner | undefined;

/** Set by the module at init (the last module initialised wins: one per process is the rule). @internal */
export function setPlainTransactionRunner(runner: PlainTransactionRunner | undefined): void {
  plainRunner = runner;
}

/**
 * A `@DurableTransaction` method called outside a run (a controller, a test) or inside a step's body:
 * its body runs in a plain transaction on its DataSource, with no checkpoint (at least once, as the
 * code around it). @internal
 */
export function plainTransaction(meta: TransactionMetadata, call: () => unknown): Promise<unknown> {
  if (!plainRunner)
    return Promise.reject(
      new DurableUsageError(
        `@DurableTransaction ${meta.declaredAt} was called before DurableExecutionModule started (or after it closed): ` +
          "its transaction needs the module's DataSource; call it once the application has initialised",
      ),
    );
  return plainRunner(meta, call);
}

/** A counting semaphore: at most `max` holders, the others wait in order. @internal */
export class Slots {
  private used = 0;
  private readonly waiting: Array<() => void> = [];
  constructor(readonly max: number) {}
  async take(): Promise<void> {
    if (this.used < this.max) {
      this.used++;
      return;
    }
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }
  give(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.used--;
  }
}

/**
 * The body caught a failed statement and went on: PostgreSQL aborted the whole transaction, so its
 * last statement fails (25P02) or its COMMIT answers ROLLBACK. A programming error, not retried. @internal
 */
export function swallowedStatementError(label: string): DurableUsageError {
  return new DurableUsageError(
    `${label} was rolled back at its commit: a statement of the body failed (the body caught the error and went on), ` +
      'which aborts the whole transaction; let the error propagate (the step is retried), or use a savepoint (manager.transaction) around the statement',
  );
}

/** `err` is PostgreSQL's "current transaction is aborted" (25P02). @internal */
export const inAbortedTransaction = (err: unknown): boolean => (err as { code?: unknown })?.code === '25P02';
