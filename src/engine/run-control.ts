import { CallTally } from './call-tally';
import { LiveCalls } from './live-calls';
import { DurableExecutionError } from '../errors/durable-execution.error';
import { DurableUsageError } from '../errors/durable-usage.error';
import { LeaseLostError } from '../errors/lease-lost.error';
import { RunCancelledError } from '../errors/run-cancelled.error';
import { RunStop, RunSuspended, stopError } from './run-stop';
import { markEngineStop } from './stop-rejections';

/**
 * Run control of one claim: why it stopped (the first stop wins), the AbortSignal handed to steps and
 * commands, the drain and cancel flags, whether a step committed, and the live calls a park waits for.
 * @internal
 */
export class RunControl extends LiveCalls {
  private stopped: { stop: RunStop; error: Error } | null = null;
  /** Set by a draining worker: the run stops (and is released) at its next step boundary. */
  draining = false;
  /** A step committed during this claim (the row's attempts were reset). */
  progressed = false;
  /** Commands reserved in this claim whose call has not been made (the run stopped in between). */
  readonly unsent = new Set<string>();
  /** Commands with a key of their own (`key` option) called in this claim: key → step index. */
  readonly ownKeys = new Map<string, number>();
  /**
   * Set while a park (sleep, wait, approval, manual in-doubt) is under way: no new step or command
   * starts until it is over; resolved when it parked (the run stopped) or did not (a signal was there).
   */
  private park: { done: Promise<void>; end: () => void } | null = null;

  private abort = new AbortController();
  private suspend!: () => void;
  /**
   * Resolves when the run stops without an error of its own (RunSuspended: a park, a drain, a release):
   * the workflow's code never sees that stop (see `handed`), so its phase ends here.
   */
  readonly suspended = new Promise<void>((r) => (this.suspend = r));
  private cancelFlag: boolean;
  /**
   * The run is in its cleanup phase (`onCancel` after a cancel): a cancel no longer stops it, and it
   * may not park (a parked cancelled run would be due again at once).
   */
  private cleaning = false;

  constructor(
    private readonly runId: string,
    cancelRequested: boolean,
    private readonly cancelReason: string | null,
    private readonly onStop: (error: Error) => void,
  ) {
    super();
    this.cancelFlag = cancelRequested;
  }

  /** The calls the workflow made and that have not settled (see CallTally). */
  readonly calls = new CallTally();
  /** The finish found a cancel request that beat it and kept the run for `onCancel` (set by the executor). */
  cleanUpNext = false;

  /** A cancel is requested; the run stops at its next step boundary (not in its cleanup phase). */
  get cancelRequested(): boolean {
    return this.cancelFlag;
  }
  set cancelRequested(requested: boolean) {
    if (!this.cleaning) this.cancelFlag = requested;
  }

  /**
   * The run was cancelled and its workflow's `onCancel` runs now: the cancel stop is cleared (a fresh
   * AbortSignal), and from here on a cancel neither stops the run nor aborts its calls. Any other
   * stop (lease lost, a drain) still ends the attempt; the next claim resumes the cleanup.
   */
  beginCleanup(): void {
    this.cleaning = true;
    this.cancelFlag = false;
    if (this.stopped?.stop.kind === 'cancelled') this.stopped = null;
    this.park = null; // a park the cancel cut short is over
    if (this.abort.signal.aborted) this.abort = new AbortController();
  }

  get signal(): AbortSignal {
    return this.abort.signal;
  }

  /** In a cancelled run's cleanup (`onCancel`): it may not park. */
  get inCleanup(): boolean {
    return this.cleaning;
  }

  protected hasStopped(): boolean {
    return this.stopped !== null;
  }

  protected stopError(): Error | null {
    return this.stopped?.error ?? null;
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
    // A cleanup phase runs because the run was cancelled: another cancel does not stop it.
    if (this.cleaning && stop.kind === 'cancelled') return this.stopped?.error ?? stopError(stop);
    this.stopped ??= { stop, error: markEngineStop(stopError(stop)) };
    const { error } = this.stopped;
    if (error instanceof RunSuspended) this.suspend();
    if (!this.abort.signal.aborted) this.abort.abort(error);
    this.onStop(error);
    this.wakeAll();
    if (!this.cleaning) this.abandonAfterGrace();
    this.park?.end(); // calls waiting for the park now see the stop
    return error;
  }

  /**
   * A statement of this claim failed (`what`: a fenced write, a lease renewal, a budget charge). A lost
   * lease stops the run for good. Any other failure but the library's own errors (a connection lost, a
   * server restarting, a serialization failure) leaves the claim not knowing what is stored: a write
   * may have committed with its answer lost. The workflow must not take that for an outcome, so the run
   * stops here and is retried from its record (a transient retry, with backoff). Returns what to throw.
   */
  storeFailed(err: unknown, what: string): unknown {
    if (err instanceof LeaseLostError) {
      this.halt({ kind: 'lease-lost', error: err });
      return err;
    }
    if (err instanceof DurableExecutionError) return err;
    if (this.stopped) return this.stopped.error;
    return this.halt({ kind: 'retry', reason: `${what} failed: ${(err as Error)?.message}`, cause: err });
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
   * Before a step or command starts: as `checkActive`, and none starts once a park has begun (a
   * sibling branch reaching its next call while the run parks would run it, then fail to commit it,
   * and the next claim would run it again).
   */
  checkNewCall(): Promise<void> | undefined {
    this.checkActive();
    return this.park ? this.afterPark() : undefined; // the common case: no promise, no await
  }

  private async afterPark(): Promise<void> {
    while (this.park) {
      await this.park.done;
      this.checkActive(); // parked: the run stopped, and this call never starts
    }
  }

  /** A park begins (the run's waits settle, blocked): calls that start now wait for its answer. */
  beginPark(): void {
    if (this.park) return;
    let end!: () => void;
    const done = new Promise<void>((r) => (end = r));
    this.park = { done, end };
  }

  /** The park under way did not park (a signal was already stored, the timeout had passed). */
  endPark(): void {
    this.park?.end();
    this.park = null;
  }

  /**
   * `onCancel` may call steps and commands, never wait: a cancelled run that parked would be due
   * again at once. The cleanup ends with a usage error instead (the run still ends cancelled).
   */
  refuseParkInCleanup(what: string): void {
    if (!this.cleaning) return;
    const error = new DurableUsageError(
      `${what} is not allowed in onCancel: a cancelled run cleans up with steps and commands only, and never waits`,
    );
    throw this.halt({ kind: 'usage', error });
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

  /**
   * Resolves once no live call of this attempt is in flight. A park (a wait, a sleep, an approval)
   * releases the lease: a sibling branch's paid call still running then would be lost and paid again
   * by the next claim, so the park lets those finish and commit first.
   */
  async quiesce(own = 0): Promise<void> {
    this.refuseParkInCleanup('waiting for an operator (an approval or a manual in-doubt command)');
    // One event-loop turn first: sibling branches called in the same tick reach their calls.
    await new Promise<void>((r) => setImmediate(r));
    this.beginPark();
    // `own`: live calls that are this park's own caller (a command parking from inside its dispatch).
    while (this.liveOps > own && !this.stopped) await new Promise<void>((r) => this.idleWaiters.push(r));
  }
}
