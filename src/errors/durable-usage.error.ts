import { DurableExecutionError } from './durable-execution.error';

/**
 * The library's API was used where it cannot work: `ctx.progress()` outside a `@DurableStep`,
 * `ctx.sleep()`/`ctx.waitForSignal()` inside one, a `@DurableWorkflow` without `run()`, a service used
 * before module init. A bug in the calling code, not a transient failure.
 */
export class DurableUsageError extends DurableExecutionError {
  declare readonly code: 'DURABLE_MISUSE';
  constructor(message: string) {
    super('DURABLE_MISUSE', message);
  }
}
