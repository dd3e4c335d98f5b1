import { DurableExecutionError } from './durable-execution.error';

/** A step ran longer than its `timeoutMs`. Retried like any transient error. */
export class StepTimeoutError extends DurableExecutionError {
  declare readonly code: 'DURABLE_STEP_TIMEOUT';
  constructor(
    public readonly stepName: string,
    public readonly timeoutMs: number,
  ) {
    super(
      'DURABLE_STEP_TIMEOUT',
      `Step "${stepName}" did not finish within ${timeoutMs} ms. Raise its timeoutMs or make it faster.`,
    );
  }
}
