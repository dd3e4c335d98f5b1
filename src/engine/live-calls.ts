import { performance } from 'node:perf_hooks';

/**
 * Once a run has stopped (a cancel, a lost lease, a drain), how long a call's body that ignores its
 * AbortSignal may go on holding it before it is abandoned.
 * @internal
 */
export const STOP_GRACE_MS = 5000;

/**
 * Call bodies of this process the engine gave up on (a timeout, a stop, run() returned) that still
 * run: a promise cannot be killed, so each holds what it allocated until it settles by itself. The
 * metrics gauge `durable_abandoned_calls_running` reads it. @internal
 */
export const abandonedBodies = { running: 0 };

/** A body counted as live (`LiveCalls.trackBody`). @internal */
export interface TrackedBody<T> {
  /** The body's own outcome (it stops counting as live when it settles). */
  readonly promise: Promise<T>;
  /** Rejects with the run's stop error when the engine gives up on the body. */
  readonly abandoned: Promise<never>;
  /** Gives up on it now (nothing when it settled already), with `why` (default: the run's stop). */
  abandon(why?: Error): void;
}

/**
 * The live calls of one claim (step bodies, dispatches, lookups, the workflow's own calls), counted
 * until they settle: what a park, a finish and a hand-back wait for. A step body may be abandoned
 * (`trackBody`): it then no longer counts. RunControl builds on it.
 * @internal
 */
export abstract class LiveCalls {
  /** Live calls (step bodies, dispatches, lookups) of this attempt not yet settled. */
  protected liveOps = 0;
  /** Of those, calls whose promise the workflow holds (not bodies the engine gave up on at a timeout). */
  private liveCallCount = 0;
  protected idleWaiters: Array<() => void> = [];
  protected settledWaiters: Array<() => void> = [];
  /** How to give up on each live step body (`trackBody`), until it settles. */
  private readonly bodies = new Map<(why?: Error) => void, string>();
  /** Step bodies of this claim the engine gave up on while they still ran (they cannot be killed). */
  abandoned = 0;
  /** Called when the last live call settles (the wait board looks whether the run is blocked). */
  onIdle?: () => void;

  private graceTimer: NodeJS.Timeout | null = null;
  /** Set by `abandonAll`: every body tracked from then on is abandoned with this error. */
  private closed: ((name: string) => Error) | null = null;

  /** The run has stopped (a bounded `settled` starts counting its grace then). */
  protected abstract hasStopped(): boolean;
  /** The error the run stopped with, if it did. */
  protected abstract stopError(): Error | null;

  /** Wakes every waiter to look again (the run stopped). */
  protected wakeAll(): void {
    this.idleWaiters.splice(0).forEach((wake) => wake());
    this.settledWaiters.splice(0).forEach((wake) => wake()); // a bounded settle starts counting
  }

  /** Live calls of this attempt (step bodies, dispatches, lookups) not yet settled. */
  get live(): number {
    return this.liveOps;
  }

  /** Calls the workflow made whose promise has not settled (a step or command not awaited yet). */
  get liveCalls(): number {
    return this.liveCallCount;
  }

  /**
   * Resolves once no call of this attempt is live (whatever stopped the run). With `graceMs`, once the
   * run has stopped, step bodies still running that long after the stop are abandoned (`trackBody`):
   * a body that ignores its AbortSignal cannot hold the run (a cancel, a lost lease, a drain) for ever.
   */
  async settled(graceMs?: number): Promise<void> {
    let deadline: number | undefined;
    while (this.liveOps > 0) {
      if (graceMs === undefined || !this.hasStopped()) {
        await new Promise<void>((r) => this.settledWaiters.push(r));
        continue;
      }
      deadline ??= performance.now() + graceMs;
      const left = deadline - performance.now();
      if (left <= 0 && this.bodies.size) {
        [...this.bodies.keys()].forEach((abandon) => abandon());
        continue;
      }
      await new Promise<void>((r) => {
        const t = setTimeout(r, Math.max(0, left) + 1);
        this.settledWaiters.push(() => (clearTimeout(t), r()));
      });
    }
  }

  /**
   * Counts a step body as live until it settles or is abandoned (`abandon()`: at its timeout, or by a
   * bounded `settled` after a stop). An abandoned body no longer holds the run; it is counted in
   * `abandoned`, and the caller revokes its gate and aborts its signal, so nothing it still does leaves
   * the process or reaches the run's record.
   */
  trackBody<T>(op: Promise<T>, onAbandon?: (why: Error) => void, name = 'a call'): TrackedBody<T> {
    this.liveOps++;
    let open = true;
    let given!: (why: Error) => void;
    const abandoned = new Promise<never>((_, reject) => (given = reject));
    abandoned.catch(() => undefined);
    const release = (): boolean => {
      if (!open) return false;
      open = false;
      this.bodies.delete(abandon);
      this.liveOps--;
      this.afterLiveChange();
      return true;
    };
    const abandon = (reason?: Error): void => {
      if (!release()) return;
      this.abandoned++;
      abandonedBodies.running++;
      op.then(settledLate, settledLate);
      const why = reason ?? this.stopError() ?? new Error('abandoned by the engine');
      onAbandon?.(why);
      given(why);
    };
    this.bodies.set(abandon, name);
    if (this.closed) abandon(this.closed(name));
    const promise = op.finally(release);
    promise.catch(() => undefined);
    return { promise, abandon, abandoned };
  }

  /**
   * Why no new attempt of the call named `name` may start (a retry's): the run stopped, or the calls
   * still live after run() returned were given up on (`abandonAll`); null when it may.
   */
  refusal(name: string): Error | null {
    return this.stopError() ?? (this.closed ? this.closed(name) : null);
  }

  /** Gives up on every body still live now, each with the error `why` makes for it. */
  abandonAll(why: (name: string) => Error): void {
    this.closed = why; // a body that starts after this (a retry's next attempt) is given up on at once
    [...this.bodies].forEach(([abandon, name]) => abandon(why(name)));
  }

  /**
   * The run stopped: bodies still running `STOP_GRACE_MS` from now are abandoned, whatever waits for
   * them (a command's outcome, a finish, a hand-back).
   */
  protected abandonAfterGrace(): void {
    if (this.graceTimer || !this.bodies.size) return;
    this.graceTimer = setTimeout(
      () => [...this.bodies.keys()].forEach((abandon) => abandon()),
      STOP_GRACE_MS,
    );
    this.graceTimer.unref();
  }

  /**
   * Counts a live call until it settles: a park waits for them (see `quiesce`). `call`: the promise the
   * workflow gets (false for a step body, which may outlive its attempt's timeout).
   */
  async track<T>(op: Promise<T>, call = true): Promise<T> {
    this.liveOps++;
    if (call) this.liveCallCount++;
    try {
      return await op;
    } finally {
      this.liveOps--;
      if (call) this.liveCallCount--;
      this.afterLiveChange();
    }
  }

  private afterLiveChange(): void {
    this.idleWaiters.splice(0).forEach((wake) => wake()); // each re-checks its own bound
    if (this.liveOps === 0) {
      this.settledWaiters.splice(0).forEach((wake) => wake());
      this.onIdle?.(); // the run may be blocked on its waits now
    }
  }
}

/** An abandoned body settled by itself at last. */
function settledLate(): void {
  abandonedBodies.running--;
}
