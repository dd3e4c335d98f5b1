import { DurableExecutionError } from './durable-execution.error';

/** `RunRepository.result()`: the run ended without succeeding (failed, dead-lettered or cancelled). */
export class RunFailedError extends DurableExecutionError {
  declare readonly code: 'DURABLE_RUN_FAILED';

  constructor(
    public readonly runId: string,
    public readonly status: 'failed' | 'dead_lettered' | 'cancelled',
    /** The run's recorded error (name, code, message, …), if any. */
    public readonly runError: { message?: string; code?: string } | null,
  ) {
    super(
      'DURABLE_RUN_FAILED',
      `Run ${runId} ended ${status}${runError?.message ? `: ${runError.message}` : ''}. ` +
        'Its error and event trail are on the run (RunRepository.get / events); RunRepository.retry(id) resumes a failed or dead-lettered run.',
    );
  }
}
