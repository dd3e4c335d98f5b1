import { DurableExecutionError } from './durable-execution.error';

/** The operation does not apply to a run in its current status (e.g. cancelling a finished run). */
export class InvalidRunStateError extends DurableExecutionError {
  declare readonly code: 'DURABLE_INVALID_RUN_STATE';
  constructor(
    public readonly runId: string,
    public readonly status: string,
    operation: string,
  ) {
    super(
      'DURABLE_INVALID_RUN_STATE',
      `Cannot ${operation} run ${runId}: it is ${status}. Nothing was changed.`,
    );
  }
}
