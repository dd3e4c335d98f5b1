import { DurableExecutionError } from './durable-execution.error';

/**
 * `RunRepository.signal` (the admin API's and the CLI's signal too) to a run whose mailbox is full: it
 * holds `limits.maxPendingSignals` signals no wait has taken yet, or `limits.maxPendingSignalsPerName`
 * of this name (`scope`). Nothing was stored. With `DurableExceptionFilter`, a 429: send again once the
 * run has taken some (a `ctx.waitForSignal` consumes one), or raise the limit.
 */
export class TooManyPendingSignalsError extends DurableExecutionError {
  declare readonly code: 'DURABLE_TOO_MANY_PENDING_SIGNALS';
  constructor(
    /** The run the signal was sent to. */
    public readonly runId: string,
    /** The signal's name. */
    public readonly signalName: string,
    /** `run`: the run's pending signals of any name are at the limit; `name`: those of this name. */
    public readonly scope: 'run' | 'name',
    /** The limit reached (`limits.maxPendingSignals` or `limits.maxPendingSignalsPerName`). */
    public readonly limit: number,
  ) {
    const name = JSON.stringify(signalName.slice(0, 80));
    super(
      'DURABLE_TOO_MANY_PENDING_SIGNALS',
      (scope === 'run'
        ? `Run ${runId} already holds ${limit} signals no wait has taken (limits.maxPendingSignals): `
        : `Run ${runId} already holds ${limit} signals named ${name} no wait has taken (limits.maxPendingSignalsPerName): `) +
        `signal ${name} was not stored. Send it again once the run has taken some (each ctx.waitForSignal ` +
        'consumes one), make sure the workflow waits for what is sent to it, or raise the limit in the module options.',
    );
  }
}
