import type { DurableEventType } from '../interfaces/events.interface';
import type { StepEnv } from './steps/step-env';
import type { WaitOutcome, WaitSpec } from './wait-types';

export type { WaitOutcome, WaitSpec };

interface Pending extends WaitSpec {
  order: number;
  dueMs: number | null;
  resolve(o: WaitOutcome): void;
  reject(err: unknown): void;
}

const turn = () => new Promise<void>((r) => setImmediate(r));

/**
 * The pending waits of one claim (`ctx.sleep`, `ctx.waitForSignal`, `ctx.waitForChild`) with
 * JavaScript's meaning: a wait registers its due time when it is called and never parks by itself; the
 * run goes on with its other branches. A wait resolves through a recorded outcome, written by one fenced
 * statement before it reaches the workflow (SETTLE_WAITS_SQL): when its timer passes (a local timer
 * asks), when a signal for it arrives (the worker hints: NOTIFY, heartbeat), or when the run is blocked
 * (no call live, replay done). Only then, with nothing ready, does the run park: one decision for the
 * whole run, due at the earliest pending time. Outcomes reach the workflow in delivery order (`seq`),
 * so a replay resolves the same race the same way.
 * @internal
 */
export class WaitBoard {
  private readonly pending: Pending[] = [];
  private order = 0;
  private running = false;
  private again = false;
  private hinted = false;
  private scheduled = false;
  private closed = false;
  private timer?: NodeJS.Timeout;

  constructor(private readonly env: StepEnv) {}

  /** Registers a wait; resolves with its outcome, rejects when the run stops first. */
  wait(spec: WaitSpec): Promise<WaitOutcome> {
    return new Promise<WaitOutcome>((resolve, reject) => {
      const dueMs = spec.due === null ? null : Date.parse(spec.due);
      this.pending.push({ ...spec, order: this.order++, dueMs, resolve, reject });
      // Settled once soon, also while calls run: a signal already stored is taken at once, and the
      // due time (a pending value) is written with that statement, so a takeover keeps it.
      this.hinted = true;
      this.poke();
    });
  }

  /** Waits pending now. */
  get size(): number {
    return this.pending.length;
  }

  /** A signal (or a child's end) may have arrived for this run. */
  hint(): void {
    if (!this.pending.some((w) => w.signal !== null)) return;
    this.hinted = true;
    this.poke();
  }

  /** Something changed (a wait registered, a call settled, a timer passed): look again soon. */
  poke(): void {
    if (this.scheduled || this.closed || !this.pending.length) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      void this.pump();
    });
  }

  /** The run stopped: every pending wait rejects with its error (the workflow unwinds). */
  fail(err: unknown): void {
    this.close();
    for (const w of this.pending.splice(0)) w.reject(err);
  }

  /** The phase is over: waits still pending are dropped (nothing recorded; their signals stay stored). */
  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
  }

  private async pump(): Promise<void> {
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    try {
      do {
        this.again = false;
        await this.round();
      } while (this.again && !this.closed);
    } catch {
      // A failed statement stopped the run (RunControl.storeFailed): `fail` rejects the waits.
    } finally {
      this.running = false;
    }
  }

  private get idle(): boolean {
    return this.closed || !!this.env.control.stop || !this.pending.length;
  }

  private async round(): Promise<void> {
    const { env } = this;
    if (this.idle) return;
    if (env.log.replaying) await env.log.replayDone();
    for (;;) {
      // Two turns: the workflow's reaction to what it got last reaches its next calls first.
      await turn();
      await turn();
      if (this.idle) return;
      // Blocked: no call of the workflow is unsettled (a step, a command, also in its own awaits).
      const blocked = env.control.live === 0 && env.control.calls.size === 0;
      const now = env.dbNow();
      const due = this.pending.some((w) => w.dueMs !== null && w.dueMs <= now);
      if (!blocked && !due && !this.hinted) return this.arm();
      if (env.replayOnly) {
        // A replay check runs nothing new: a run blocked on its waits is where its record ends.
        const first = this.pending[0];
        if (blocked)
          for (const w of this.pending.splice(0)) w.reject(env.replayOnly.reached(first.index, first.record));
        return;
      }
      this.hinted = false;
      if (!(await this.settle(blocked))) return this.arm();
      // One outcome per statement: another stored signal may already be there for a wait still pending
      // (it must not wait for the calls to end), so look again until a statement finds nothing ready.
      if (this.pending.some((w) => w.signal !== null)) this.hinted = true;
    }
  }

  /** One settle statement; true when a wait resolved (or a child's cancel was asked for first). */
  private async settle(park: boolean): Promise<boolean> {
    const { env } = this;
    const seq = env.log.takeSeq();
    const records = env.log.takePending();
    const signal = this.pending.find((w) => w.signal !== null);
    const first = this.pending[0];
    const reason = signal ? `waiting for signal "${signal.signal}"` : 'sleeping';
    const event: DurableEventType = signal ? 'run.waiting_for_signal' : 'run.sleeping';
    const payload = signal
      ? {
          name: signal.signal,
          timeoutMs: signal.dueMs === null ? null : Math.max(0, signal.dueMs - env.dbNow()),
        }
      : { step: first.index, ms: Math.max(0, (first.dueMs ?? 0) - env.dbNow()) };
    if (park) env.control.beginPark();
    let got;
    try {
      got = await env.fenced(
        () =>
          env.store.settleWaits(env.fence, {
            waits: this.pending.map(({ index, record, signal: s, due }) => ({
              index,
              record,
              signal: s,
              due,
            })),
            park,
            seq,
            records,
            reason,
            event,
            payload,
            attemptsDelta: env.control.attemptsDelta('give-back'),
          }),
        // As before the wait board: a signal wait's statement, a sleep's park (pause points name them).
        signal ? 'wait-for-signal' : park ? 'park' : 'fire-timer',
        records,
      );
    } catch (err) {
      env.log.abandon(seq);
      throw err;
    }
    if (got.outcome === 'parked') {
      env.log.abandon(seq);
      throw env.control.halt({ kind: 'parked', reason, until: got.availableAt, forOperator: false });
    }
    env.control.endPark();
    if (got.cancelRequested && !env.control.inCleanup) {
      // The statement found a cancel and settled nothing: pending waits reject with RunCancelledError
      // (docs/API.md), so code after a wait never runs once the run was cancelled (as plain JavaScript's
      // aborted run; a busy run used to get the outcome, then stop at its next call).
      env.log.abandon(seq);
      env.control.checkActive(false);
    }
    const at = this.pending.findIndex((w) => w.index === got.index);
    if (got.outcome === 'none' || at < 0) {
      env.log.abandon(seq);
      return false;
    }
    const w = this.pending[at];
    if (got.outcome === 'cancel_first') {
      env.log.abandon(seq);
      const child = w.child!;
      await env.fenced(
        () => env.store.cancelChild(env.fence, child.runId, child.cancelReason),
        'cancel of a child run',
      );
      return true;
    }
    this.pending.splice(at, 1);
    env.control.progressed = true;
    await env.log.deliverLive(seq);
    w.resolve({ outcome: got.outcome, payload: got.payload });
    return true;
  }

  /** A local timer for the earliest due time: the statement is asked once it passed. */
  private arm(): void {
    clearTimeout(this.timer);
    const dues = this.pending.map((w) => w.dueMs).filter((d): d is number => d !== null);
    if (!dues.length || this.closed) return;
    const ms = Math.max(0, Math.min(...dues) - this.env.dbNow()) + 5;
    this.timer = setTimeout(() => this.poke(), ms);
    this.timer.unref?.();
  }
}

/**
 * A NOTIFY of the wake channel: `$signal:<id>` (a signal for a running run) hints that run's pending
 * waits and returns true; any other payload is work for a kind (false); none (a reconnect, when a
 * notice may have been lost) hints every run and returns false.
 * @internal
 */
export function hintWaits(
  payload: string | undefined,
  claims: Iterable<{ claim: { id: string }; run?: { board: WaitBoard } }>,
): boolean {
  const id = payload?.startsWith('$signal:') ? payload.slice('$signal:'.length) : null;
  if (payload && id === null) return false;
  for (const f of claims) if (id === null || f.claim.id === id) f.run?.board.hint();
  return id !== null;
}
