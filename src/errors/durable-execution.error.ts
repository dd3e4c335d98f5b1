/**
 * Every stable `code` a `DurableExecutionError` can carry. Match on these, not on messages; a new code is
 * a new minor version.
 */
export type DurableErrorCode =
  | 'DURABLE_CHILD_RUN_FAILED'
  | 'DURABLE_COMMAND_FAILED'
  | 'DURABLE_COMMAND_IN_STEP'
  | 'DURABLE_COMMAND_NOT_FOUND'
  | 'DURABLE_COMMAND_REJECTED'
  | 'DURABLE_DANGLING_CALL'
  | 'DURABLE_DUPLICATE_REGISTRATION'
  | 'DURABLE_FOREIGN_THREAD'
  | 'DURABLE_FORK_REFUSED'
  | 'DURABLE_IDEMPOTENCY_CONFLICT'
  | 'DURABLE_INVALID_ARGUMENT'
  | 'DURABLE_INVALID_COMMAND_STATE'
  | 'DURABLE_INVALID_OPTIONS'
  | 'DURABLE_INVALID_RUN_STATE'
  | 'DURABLE_LEASE_LOST'
  | 'DURABLE_MISSING_CONCURRENCY_KEY'
  | 'DURABLE_MISSING_DEPENDENCY'
  | 'DURABLE_MISUSE'
  | 'DURABLE_MOUNT_MISMATCH'
  | 'DURABLE_NO_WORKER_FOR_KIND'
  | 'DURABLE_NON_DETERMINISM'
  | 'DURABLE_NON_RETRYABLE'
  | 'DURABLE_NOT_SERIALIZABLE'
  | 'DURABLE_PAYLOAD_TOO_LARGE'
  | 'DURABLE_RUN_CANCELLED'
  | 'DURABLE_RUN_FAILED'
  | 'DURABLE_RUN_NOT_FOUND'
  | 'DURABLE_SCHEDULE_CONFLICT'
  | 'DURABLE_SCHEDULE_NOT_FOUND'
  | 'DURABLE_SCHEDULE_TOO_FREQUENT'
  | 'DURABLE_RESULT_TIMEOUT'
  | 'DURABLE_SCHEMA_CONFLICT'
  | 'DURABLE_SCHEMA_NOT_READY'
  | 'DURABLE_SIGNAL_TIMEOUT'
  | 'DURABLE_STALE_FENCE'
  | 'DURABLE_STEP_TIMEOUT'
  | 'DURABLE_CALL_ABANDONED'
  | 'DURABLE_TOO_MANY_PENDING_SIGNALS'
  | 'DURABLE_TOO_MANY_STREAM_CLIENTS'
  | 'DURABLE_UNAUTHENTICATED_FENCE'
  | 'DURABLE_UNKNOWN_RUN_KIND';

/**
 * Base class of every error this library throws. `code` is stable across versions: match on it,
 * not on the message. The message says what happened and what to do about it.
 */
export class DurableExecutionError extends Error {
  constructor(
    /** Stable machine-readable code, e.g. `DURABLE_LEASE_LOST`. */
    public readonly code: DurableErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = new.target.name;
  }
}
