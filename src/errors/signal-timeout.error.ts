import { DurableExecutionError } from './durable-execution.error';

/** `ctx.waitForSignal` reached its timeout (database clock) with no signal. */
export class SignalTimeoutError extends DurableExecutionError {
  declare readonly code: 'DURABLE_SIGNAL_TIMEOUT';
  constructor(
    public readonly signalName: string,
    public readonly timeoutMs: number,
  ) {
    super(
      'DURABLE_SIGNAL_TIMEOUT',
      `No "${signalName}" signal arrived within ${timeoutMs} ms. Catch SignalTimeoutError in the workflow to escalate or give up.`,
    );
  }
}
