/**
 * Base class of every error this library throws. `code` is stable across versions: match on it,
 * not on the message. The message says what happened and what to do about it.
 */
export class DurableExecutionError extends Error {
  constructor(
    /** Stable machine-readable code, e.g. `DURABLE_LEASE_LOST`. */
    public readonly code: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = new.target.name;
  }
}
