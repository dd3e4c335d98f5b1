import { DurableExecutionError } from './durable-execution.error';

/** `RunRepository.result()` gave up waiting: the run had not ended within `timeoutMs`. */
export class ResultTimeoutError extends DurableExecutionError {
  declare readonly code: 'DURABLE_RESULT_TIMEOUT';

  constructor(
    public readonly runId: string,
    public readonly timeoutMs: number,
    public readonly status: string,
  ) {
    super(
      'DURABLE_RESULT_TIMEOUT',
      `Run ${runId} had not ended after ${timeoutMs} ms (status ${status}). It goes on: call result() again, ` +
        'or read it later with RunRepository.get.',
    );
  }
}
