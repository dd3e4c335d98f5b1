import { DurableExecutionError } from './durable-execution.error';

/** No run with this id exists. */
export class RunNotFoundError extends DurableExecutionError {
  declare readonly code: 'DURABLE_RUN_NOT_FOUND';
  constructor(public readonly runId: string) {
    super(
      'DURABLE_RUN_NOT_FOUND',
      `Run ${runId} does not exist (check the id; runs deleted by retention are gone).`,
    );
  }
}
