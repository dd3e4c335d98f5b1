import { DurableExecutionError } from './durable-execution.error';

/** How a child run ended without a result for its parent, or `timed_out`: the parent stopped waiting. */
export type ChildRunEnd = 'failed' | 'dead_lettered' | 'cancelled' | 'timed_out';

/**
 * `ctx.child` / `ctx.waitForChild`: the child run did not succeed (failed, dead-lettered, cancelled), or
 * the wait's `timeoutMs` passed first (`timed_out`: the child was cancelled). Catch it in the parent to
 * go on without the child; uncaught, it fails the parent like any error.
 */
export class ChildRunError extends DurableExecutionError {
  declare readonly code: 'DURABLE_CHILD_RUN_FAILED';
  constructor(
    public readonly childRunId: string,
    public readonly childKind: string,
    public readonly childStatus: ChildRunEnd,
    /** The child's recorded error (name, code, message), if any. */
    public readonly childError: { name?: string; code?: string; message?: string } | null,
  ) {
    super(
      'DURABLE_CHILD_RUN_FAILED',
      childStatus === 'timed_out'
        ? `Child run ${childRunId} (${childKind}) did not end within the wait's timeoutMs; it was cancelled. Catch ChildRunError to go on without it.`
        : `Child run ${childRunId} (${childKind}) ended ${childStatus}${childError?.message ? `: ${childError.message}` : ''}. Catch ChildRunError in the parent to go on without it; its trail is on the child run.`,
    );
  }
}
