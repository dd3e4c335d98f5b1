import { DurableExecutionError } from './durable-execution.error';

/**
 * `start()` of a kind no live worker serves, with `unservedKinds: 'refuse'` (no worker's presence row
 * lists the kind: none runs it, or they all stopped); or `DurableSchedules.create` of a schedule for
 * such a kind (`subject: 'schedule'`). Nothing was written.
 */
export class NoWorkerForKindError extends DurableExecutionError {
  declare readonly code: 'DURABLE_NO_WORKER_FOR_KIND';
  constructor(
    public readonly kind: string,
    subject: 'run' | 'schedule' = 'run',
  ) {
    const k = JSON.stringify(kind.slice(0, 80));
    super(
      'DURABLE_NO_WORKER_FOR_KIND',
      `No live worker serves kind ${k}: the ${subject === 'run' ? 'run was not started' : 'schedule was not created'}. ` +
        `Start a worker that registers @DurableWorkflow(${k}), or set unservedKinds: 'warn' to ` +
        (subject === 'run' ? 'queue runs for one.' : 'accept it (its runs wait for one).'),
    );
  }
}
