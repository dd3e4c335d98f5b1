import { DurableExecutionError } from './durable-execution.error';

/**
 * `start()` named a workflow kind no `@DurableWorkflow` in this app registers, in a process that runs a
 * worker (a producer-only process, `worker.enabled: false`, starts any kind).
 */
export class UnknownRunKindError extends DurableExecutionError {
  declare readonly code: 'DURABLE_UNKNOWN_RUN_KIND';
  constructor(
    public readonly kind: string,
    known: string[],
  ) {
    super(
      'DURABLE_UNKNOWN_RUN_KIND',
      `No @DurableWorkflow(${JSON.stringify(kind.slice(0, 80))}) is registered in this app (known kinds: ${known.length ? known.join(', ') : 'none'}). ` +
        "Add the workflow class to a module's providers, or fix the kind. (A producer-only process, with worker.enabled: false, may start kinds it does not register.)",
    );
  }
}
