import { DurableExecutionError } from './durable-execution.error';

/**
 * A workflow's `run()` returned while a step or command it called was still running.
 * @deprecated No longer thrown: as in JavaScript, a call still running when `run()` returns (a race's
 * loser, `void this.audit()`) is let finish, and its outcome recorded, before the run ends. Kept so
 * code that names it compiles.
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
