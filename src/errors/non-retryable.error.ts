import { DurableExecutionError } from './durable-execution.error';

/** Throw from a step (or command) to fail the run at once, without retries. */
export class NonRetryableError extends DurableExecutionError {
  declare readonly code: 'DURABLE_NON_RETRYABLE';
  constructor(message: string, options?: { cause?: unknown }) {
    super('DURABLE_NON_RETRYABLE', message, options);
  }
}
