import { DurableExecutionError } from './durable-execution.error';

/**
 * A workflow's `run()` returned while a step or command it called was still running: a call that is
 * not awaited (`void this.audit()`) has an outcome nobody records in order, and replay cannot place
 * it. The run fails with this error; await every call (or `Promise.all` them) before returning.
 */
export class DanglingCallError extends DurableExecutionError {
  declare readonly code: 'DURABLE_DANGLING_CALL';
  constructor(
    public readonly kind: string,
    public readonly live: number,
  ) {
    super(
      'DURABLE_DANGLING_CALL',
      `The workflow "${kind}" returned while ${live} call(s) it started were still running (a step or command ` +
        'not awaited). Await every call before run() returns, e.g. with Promise.all. The run has failed.',
    );
  }
}
