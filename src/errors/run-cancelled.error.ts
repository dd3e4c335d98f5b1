import { DurableExecutionError } from './durable-execution.error';

/** The run was cancelled; raised inside the workflow at the next step boundary or heartbeat. */
export class RunCancelledError extends DurableExecutionError {
  declare readonly code: 'DURABLE_RUN_CANCELLED';
  constructor(
    public readonly runId: string,
    reason?: string | null,
  ) {
    super('DURABLE_RUN_CANCELLED', `Run ${runId} was cancelled${reason ? `: ${reason}` : ''}.`);
  }
}
