import type { RetryPolicy } from '../options/durable-execution-options.interface';

/** The isolation level of a durable transaction (PostgreSQL's). */
export type DurableTransactionIsolation = 'read committed' | 'repeatable read' | 'serializable';

/** Options of `@DurableTransaction`. */
export interface DurableTransactionOptions {
  /** Stable name recorded with the checkpoint. Default `ClassName.methodName`. */
  name?: string;
  /**
   * The TypeORM DataSource the body's transaction runs on, by its `@nestjs/typeorm` name. Default: the
   * module's own DataSource (the app's, when the module reuses it: `database.dataSourceName` or
   * `database.dataSource`). When it is the module's database, the step's checkpoint commits in the same
   * transaction; when it is another database, a completion row and a fence row do (see
   * docs/EXISTING-APP.md, "Writing to your own database").
   */
  dataSource?: string;
  /** The transaction's isolation level. Default `'read committed'`. */
  isolation?: DurableTransactionIsolation;
  /**
   * Retry policy, merged over the module's `defaultRetry`. Serialization failures and deadlocks
   * (SQLSTATE 40001, 40P01) and lock timeouts (55P03) are retried like any other error of the body.
   */
  retry?: RetryPolicy;
  /**
   * The transaction's deadline: past it the running statement is cancelled, the transaction rolled
   * back (its connection closed) and the attempt fails with `StepTimeoutError`. Default: the module's
   * `defaultTimeoutMs` (10 minutes); 0: none.
   */
  timeoutMs?: number;
}

/** Metadata recorded by `@DurableTransaction`. @internal */
export interface TransactionMetadata {
  name: string;
  dataSource?: string;
  isolation: DurableTransactionIsolation;
  retry?: RetryPolicy;
  timeoutMs?: number;
  /** `Class.method`, for error messages. */
  declaredAt: string;
}
