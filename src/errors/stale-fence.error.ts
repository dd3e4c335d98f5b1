import { DurableExecutionError } from './durable-execution.error';

/**
 * A target refused a command's request (`FenceVerifier.check`): it carries a fencing token smaller than
 * one the target already saw for the run, so it comes from a worker whose claim was superseded (frozen
 * past its lease while another worker took the run over). Roll back the request's transaction: applying
 * it could repeat an effect the new owner makes. `DurableExceptionFilter` answers 409.
 */
export class StaleFenceError extends DurableExecutionError {
  declare readonly code: 'DURABLE_STALE_FENCE';
  constructor(
    /** The run the refused request names. */
    public readonly runId: string,
    /** The refused token's timeline. */
    public readonly timeline: number,
    /** The refused token's epoch. */
    public readonly epoch: number,
  ) {
    super(
      'DURABLE_STALE_FENCE',
      `Refused a request of run ${runId} with fencing token (timeline ${timeline}, epoch ${epoch}): a greater ` +
        `token was already seen for the run, so the request comes from a worker whose claim was superseded ` +
        `and it must not be applied. The fence was not changed.`,
    );
  }
}
