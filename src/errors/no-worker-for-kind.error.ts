import { DurableExecutionError } from './durable-execution.error';

/**
 * `start()` of a kind no live worker serves, with `unservedKinds: 'refuse'` (no worker's presence row
 * lists the kind: none runs it, or they all stopped). Nothing was written.
 */
export class NoWorkerForKindError extends DurableExecutionError {
  declare readonly code: 'DURABLE_NO_WORKER_FOR_KIND';
  constructor(public readonly kind: string) {
    super(
      'DURABLE_NO_WORKER_FOR_KIND',
      `No live worker serves kind ${JSON.stringify(kind.slice(0, 80))}: the run was not started. Start a worker ` +
        `that registers @DurableWorkflow(${JSON.stringify(kind.slice(0, 80))}), or set unservedKinds: 'warn' to queue runs for one.`,
    );
  }
}
