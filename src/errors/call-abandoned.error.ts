import { DurableExecutionError } from './durable-execution.error';

/**
 * The engine gave up on a call still live after the workflow's `run()` had returned (a race's loser,
 * a call the code stopped awaiting), once `worker.lateCallGraceMs` had passed: its signal fires with
 * this error, its requests and its calls on the run are refused, and the run finishes without its
 * result (a command stays in doubt in the record). Give the call a `timeoutMs`, or await it.
 */
export class CallAbandonedError extends DurableExecutionError {
  declare readonly code: 'DURABLE_CALL_ABANDONED';
  constructor(
    public readonly callName: string,
    public readonly graceMs: number,
  ) {
    super(
      'DURABLE_CALL_ABANDONED',
      `"${callName}" was still running ${graceMs} ms after run() returned and was abandoned: its result is not ` +
        `recorded. Give it a timeoutMs, await it before run() returns, or raise worker.lateCallGraceMs.`,
    );
  }
}
