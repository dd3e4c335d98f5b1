/** What happens to a child run still going when its parent ends first. */
export type ParentClosePolicy = 'cancel' | 'abandon';

/** Options of `ctx.startChild` (and of `ctx.child`, which adds `timeoutMs`). */
export interface StartChildOptions {
  /**
   * When the parent ends (any way) before the child: `'cancel'` (default) cancels the child (at once if it
   * never began, else its worker stops it and runs its `onCancel`); `'abandon'` lets it run on.
   */
  parentClose?: ParentClosePolicy;
  /** Higher runs are claimed first. Default 0. */
  priority?: number;
  /** Claims without progress before the child is dead-lettered. Default: its workflow's, then the module's. */
  maxAttempts?: number;
  /** The child's key for its kind's `perKeyConcurrency`. Default: its workflow's `concurrencyKey(input)`. */
  concurrencyKey?: string;
}

/** Options of `ctx.waitForChild`. */
export interface WaitForChildOptions {
  /**
   * Stop waiting after this many ms (database clock, from the first time the wait was reached): the child
   * is cancelled and the wait throws ChildRunError (`childStatus: 'timed_out'`).
   */
  timeoutMs?: number;
}

/** Options of `ctx.child`: a start and a wait. */
export interface ChildOptions extends StartChildOptions, WaitForChildOptions {}

/**
 * A child run started by `ctx.startChild`: pass it to `ctx.waitForChild` for its result. `O` is the
 * child's output type as stored (from its workflow class).
 */
export interface ChildRun<O = unknown> {
  readonly runId: string;
  readonly kind: string;
  /** @internal Carries the output type only. */
  readonly __output?: O;
}
