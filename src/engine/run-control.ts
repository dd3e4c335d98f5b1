import { RunCancelledError } from '../errors/run-cancelled.error';
import { RunStop, stopError } from './run-stop';

/**
 * Run control of one claim: why it stopped (the first stop wins), the AbortSignal handed to steps and
 * commands, the drain and cancel flags, whether a step committed, and the live calls a park waits for.
 * @internal
 */
export class RunControl {
  private readonly abort = new AbortController();
  private stopped: { stop: RunStop; error: Error } | null = null;
  /** Set by a draining worker: the run stops (and is released) at its next step boundary. */
  draining = false;
  /** A step committed during this claim (the row's attempts were reset). */
  progressed = false;
  /** Live calls (step bodies, dispatches, lookups) of this attempt not yet settled. */
  private liveOps = 0;
  private idleWaiters: Array<() => void> = [];

  constructor(
    private readonly runId: string,
    /** A cancel is requested; the run stops at its next step boundary. */
    public cancelRequested: boolean,
    private readonly cancelReason: string | null,
    private readonly onStop: (error: Error) => void,
  ) {}

  get signal(): AbortSignal {
    return this.abort.signal;
  }

  /** Why the run stopped, or null while it runs. */
  get stop(): RunStop | null {
    return this.stopped?.stop ?? null;
  }

  /** What the workflow's code sees since the run stopped (null while it runs). */
  get error(): Error | null {
    return this.stopped?.error ?? null;
  }

  /** Stops the run (the first stop wins): later steps throw its error, the AbortSignal fires. */
  halt(stop: RunStop): Error {
    this.stopped ??= { stop, error: stopError(stop) };
    const { error } = this.stopped;
    if (!this.abort.signal.aborted) this.abort.abort(error);
    this.onStop(error);
    this.idleWaiters.splice(0).forEach((wake) => wake());
    return error;
  }

  /** The cancellation error of this run. */
  cancelled(): RunCancelledError {
    return new RunCancelledError(this.runId, this.cancelReason);
  }

  /**
   * Called at every step boundary: a lost lease or a cancellation ends the run here. A drain ends it
   * only before a step starts (`startingStep`), never between a finished step and its commit.
   */
  checkActive(startingStep = true): void {
    if (!this.stopped && this.draining && startingStep) this.halt({ kind: 'drain' });
    if (!this.stopped && this.cancelRequested) this.halt({ kind: 'cancelled', error: this.cancelled() });
    if (this.stopped) throw this.stopped.error;
  }

  /**
   * How `attempts` moves when this claim leaves `running`. Attempts count claims without progress: a
   * claim adds one, a commit resets it to 0. A release or park that is not a failure gives the claim
   * back (`give-back`); a failure counts once (`count`): already counted by the claim unless a commit
   * reset it.
   */
  attemptsDelta(how: 'give-back' | 'count'): number {
    if (how === 'give-back') return this.progressed ? 0 : -1;
    return this.progressed ? 1 : 0;
  }

  /** Counts a live call until it settles: a park waits for them (see `quiesce`). */
  async track<T>(op: Promise<T>): Promise<T> {
    this.liveOps++;
    try {
      return await op;
    } finally {
      if (--this.liveOps === 0) this.idleWaiters.splice(0).forEach((wake) => wake());
    }
  }

  /**
   * Resolves once no live call of this attempt is in flight. A park (a wait, a sleep, an approval)
   * releases the lease: a sibling branch's paid call still running then would be lost and paid again
   * by the next claim, so the park lets those finish and commit first.
   */
  async quiesce(): Promise<void> {
    // One event-loop turn first: sibling branches called in the same tick reach their calls.
    await new Promise<void>((r) => setImmediate(r));
    while (this.liveOps > 0 && !this.stopped) await new Promise<void>((r) => this.idleWaiters.push(r));
  }
}
