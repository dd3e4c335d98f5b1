import { DurableExecutionError } from './durable-execution.error';

/**
 * A fenced write matched no row: another worker claimed the run (its epoch moved on) or the run left
 * `running`. The executor stops touching the run at once; nothing more is written for it by this worker.
 */
export class LeaseLostError extends DurableExecutionError {
  declare readonly code: 'DURABLE_LEASE_LOST';
  constructor(
    public readonly runId: string,
    public readonly epoch: number,
    public readonly during: string,
  ) {
    super(
      'DURABLE_LEASE_LOST',
      `Lost the lease on run ${runId} (epoch ${epoch}) during ${during}; another worker owns it now. ` +
        'This worker stopped driving it. If this is frequent, raise worker.leaseTtlMs or fix long event-loop stalls.',
    );
  }
}
