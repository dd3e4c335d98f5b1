import { hintWaits } from './wait-board';
import {
  BeforeApplicationShutdown,
  Inject,
  Injectable,
  Logger,
  OnApplicationBootstrap,
} from '@nestjs/common';
import { DURABLE_EXECUTION_OPTIONS } from '../durable-execution.constants';
import { DurableRegistry } from './durable.registry';
import type { ResolvedDurableOptions } from '../options/durable-execution-options.interface';
import { DurableObservers } from './durable-observers';
import type { ClaimedRun } from '../store/run-state/claim-runs';
import { RunStateStore } from '../store/run-state/run-state.store';
import { ActiveRun } from './active-run';
import type { HeartbeatStop } from './run-stop';
import { crashPoint } from './crash-points';
import { afterClaimPoint } from './pause-points';
import { Executor } from './executor.service';
import type { WakeListener } from '../store/wake-listener';
import { longTimeout } from '../util/timers';
import { DURABLE_JOB_NAMES, DurableJobs, jobName, ScheduledJob } from './durable-jobs';
import { announceDrain, announceWorker, wakeWhenDue, warnWithoutShutdownHooks } from './worker-announce';
import { installStopRejectionGuard } from './stop-rejections';
import { replayOnly } from './replay-check-report';
import { WorkerLimits } from './worker-limits';
import { HandoffDesk, workerDesk } from './handoff-desk';
import { renewLeases } from './worker-heartbeat';

/**
 * Claims due runs (up to `concurrency` in flight), drives them through the executor, renews their
 * leases by heartbeat, wakes on NOTIFY, and drains on shutdown. Call `app.enableShutdownHooks()` so
 * SIGTERM reaches `beforeApplicationShutdown`.
 */
@Injectable()
export class DurableWorker implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('DurableExecution');
  /** Claims driven here by `<run id>:<epoch>` (a stale attempt may still unwind); `run` once prepared. */
  private readonly inFlight = new Map<string, { claim: ClaimedRun; run?: ActiveRun; done: Promise<void> }>();
  /** Claims (by `<run id>:<epoch>`) whose lease was lost or cancel requested while being prepared. */
  private readonly stopBeforeStart = new Map<string, HeartbeatStop>();
  private draining = false;
  /** The claim round under way (tick): a drain waits for it, its runs are in flight too. */
  private claiming: Promise<void> | null = null;
  private again = false;
  private idleTicks = 0;
  private errors = 0; // claims failed in a row
  private listener?: WakeListener;
  private unguard?: () => void;
  /** The claim poll, a job (DurableJobs); the heartbeat is a timer of its own (the drain needs it). */
  private poll?: ScheduledJob;
  private beatTimer?: NodeJS.Timeout;
  private hooksCheck?: NodeJS.Timeout; // the look for a SIGTERM listener
  /** Runs starts hand this worker (hand-off): the slots its claims offer, the runs it begins by a read. */
  private readonly desk: HandoffDesk;

  constructor(
    private readonly store: RunStateStore,
    private readonly executor: Executor,
    private readonly registry: DurableRegistry,
    @Inject(DURABLE_EXECUTION_OPTIONS) private readonly options: ResolvedDurableOptions,
    private readonly observers: DurableObservers,
    private readonly jobs: DurableJobs,
    private readonly limits: WorkerLimits,
  ) {
    const room = () => options.worker.concurrency - this.inFlight.size;
    this.desk = workerDesk(store, options, registry, room, (c) => this.handed(c), this.logger);
  }
  /** This worker's identity in the record (`worker_id`). */
  get id(): string {
    return this.options.worker.workerId;
  }
  /** Runs currently driven by this process. */
  get inFlightCount(): number {
    return this.inFlight.size;
  }
  onApplicationBootstrap(): void {
    const w = this.options.worker;
    if (!w.enabled || replayOnly()) return;
    // Kept alive: a worker-only process lives on these timers (also with the database down).
    const poll = jobName(DURABLE_JOB_NAMES.workerPoll, this.options.database.schema);
    this.poll = this.jobs.start(poll, { everyMs: w.pollIntervalMs }, () => this.pollTick(), true);
    this.beatTimer = setInterval(() => void this.safeHeartbeat(), w.heartbeatMs);
    this.listener = this.store.wakeListener(
      (p) => hintWaits(p, this.inFlight.values()) || this.desk.heard(p) || this.nudge(),
    );
    this.listener.start();
    announceWorker(this.logger, this.store, this.id, w.concurrency, this.registry.kinds());
    this.hooksCheck = warnWithoutShutdownHooks(this.logger);
  }

  /** Claims right away (NOTIFY, a finished run, a test). Coalesces concurrent calls. */
  nudge(): void {
    this.idleTicks = 0;
    void this.tick().catch(() => undefined);
  }

  /** One claim round: up to `concurrency − inFlight` runs in one statement, driven; resolves with how many. */
  async tick(): Promise<number> {
    if (this.draining) return 0;
    this.unguard ??= installStopRejectionGuard(); // from the first claim on, until the drain
    if (this.claiming) {
      this.again = true;
      return 0;
    }
    let roundEnded!: () => void;
    this.claiming = new Promise<void>((r) => (roundEnded = r));
    let total = 0;
    try {
      do {
        this.again = false;
        const free = this.options.worker.concurrency - this.inFlight.size - this.desk.held;
        const inFlight = [...this.inFlight.values()].map((f) => f.claim.id);
        const offer = this.desk.claiming(free);
        const batch = await this.limits.claim(this.id, free, inFlight, offer);
        this.desk.claimed(batch, free);
        const { runs: claims, heldBack } = batch;
        this.errors = 0;
        this.again ||= heldBack > 0 && claims.length < free; // held-back runs left the index: others may be due
        this.again ||= this.desk.withdrawNext; // a queue while slots stay kept for starts: take them back
        total += claims.length;
        if (this.observers.active)
          this.observers.workerTicked({ workerId: this.id, claimedKinds: claims.map((c) => c.kind) });
        for (const claim of claims) this.track(claim, this.start(claim));
      } while (this.again && !this.draining);
    } catch (err) {
      this.desk.claimed(null);
      this.errors++;
      if (this.observers.active)
        this.observers.workerTicked({ workerId: this.id, claimedKinds: [], error: err });
      if (this.errors === 1 || this.errors % 20 === 0)
        this.logger.warn(`claim failed (${this.errors} in a row), backing off: ${(err as Error).message}`);
      // Tried again soon, not at the next poll (which may be a minute away): a wake-up that came
      // while the pool was busy or a connection dropped must not wait for it (backoff up to 5 s).
      if (!this.draining) setTimeout(() => this.tick(), Math.min(5000, 100 * 2 ** this.errors)).unref();
    } finally {
      this.claiming = null;
      roundEnded();
    }
    return total;
  }

  /** Waits until every run in flight has reached a resting point (tests and drain). */
  async idle(): Promise<void> {
    while (this.inFlight.size) await Promise.all([...this.inFlight.values()].map((f) => f.done));
  }

  /** A run a start handed here, read: driven as a claimed one (for observers, a round of its own). */
  private handed(claim: ClaimedRun): void {
    if (this.observers.active) this.observers.workerTicked({ workerId: this.id, claimedKinds: [claim.kind] });
    this.track(claim, this.start(claim));
  }

  private async start(claim: Parameters<Executor['prepare']>[0]): Promise<ActiveRun> {
    await afterClaimPoint(claim, this.id);
    return this.executor.prepare(claim, this.id);
  }

  private track(claim: ClaimedRun, prepared: Promise<ActiveRun>): void {
    const key = `${claim.id}:${claim.epoch}`;
    let run: ActiveRun | undefined;
    const done = prepared
      .then((r) => {
        run = r;
        this.inFlight.set(key, { claim, run, done });
        if (this.draining) r.control.draining = true;
        const early = this.stopBeforeStart.get(key);
        if (early) {
          this.stopBeforeStart.delete(key);
          r.control.halt(early);
        }
        return this.executor.drive(r);
      })
      .catch((err) => this.logger.error(`run ${claim.id} could not be prepared: ${(err as Error).message}`))
      .finally(() => {
        this.inFlight.delete(key);
        this.stopBeforeStart.delete(key);
        if (this.draining) return;
        this.nudge();
        const stop = run?.control.stop;
        wakeWhenDue(stop?.kind === 'parked' ? stop.until : null, () => this.nudge());
      });
    this.inFlight.set(key, { claim, done });
  }

  /** Renews all leases in one statement; runs whose lease is gone or that were cancelled are stopped. */
  heartbeat(): Promise<void> {
    // Every claim counts, also one still being prepared (its replay read may wait on a busy pool).
    return renewLeases(this.store, this.id, [...this.inFlight.values()], this.stopBeforeStart);
  }

  private pollTick(): void {
    // Back off while idle: after 5 empty polls only every 2nd, then 4th, up to every 8th poll claims.
    const skip = Math.min(8, 2 ** Math.floor(this.idleTicks / 5));
    if (this.idleTicks++ % skip !== 0) return;
    void this.tick().then((n) => {
      if (n > 0 || this.inFlight.size) this.idleTicks = 0;
    });
  }

  private safeHeartbeat(): Promise<void> {
    const warn = (err: Error) => this.logger.warn(`heartbeat failed (leases may lapse): ${err.message}`);
    return this.heartbeat().catch(warn);
  }

  /**
   * Graceful drain: stop claiming, give in-flight steps `drainTimeoutMs`, then release the leases of
   * runs still in flight (fenced): at once when no call of theirs is live, else due at their lease's
   * end (a call that outlived the grace may still act until then).
   */
  async beforeApplicationShutdown(): Promise<void> {
    if (this.draining) return;
    this.draining = true; // also when the timers are off (tick() driven): no claim after this point
    clearTimeout(this.hooksCheck);
    this.poll?.stop(); // @nestjs/schedule may have cleared it already: harmless
    this.poll = undefined;
    // Runs stop at their next step boundary and release themselves; the heartbeat keeps renewing.
    for (const f of this.inFlight.values()) if (f.run) f.run.control.draining = true;
    const unlistened = this.listener?.stop(); // a round trip: not on the drain's clock
    // No slot offered any more, and the runs starts handed here and not begun handed back.
    const handedBack = this.desk.close(this.claiming, () =>
      [...this.inFlight.values()].map((f) => f.claim.id),
    );
    // A timer of the drain's own, beside the regular heartbeat (neither is a @nestjs/schedule job).
    const drainBeat = setInterval(() => void this.safeHeartbeat(), this.options.worker.heartbeatMs);
    const deadline = new Promise<void>((r) => longTimeout(r, this.options.worker.drainTimeoutMs, true));
    const inFlight = this.inFlight.size;
    await Promise.race([(this.claiming ?? Promise.resolve()).then(() => this.idle()), deadline]);
    crashPoint('during-drain');
    const left = [...this.inFlight.values()].map((f) => f.run).filter((r): r is ActiveRun => !!r);
    const live = left.filter((r) => r.control.live > 0).length;
    await Promise.all(left.map((run) => this.release(run)));
    announceDrain(this.logger, this.id, inFlight, left.length, live);
    clearInterval(drainBeat);
    this.unguard?.();
    clearInterval(this.beatTimer);
    this.beatTimer = undefined;
    await Promise.all([unlistened, handedBack]);
  }

  /**
   * Hands a run back at the end of the drain; with a call still live here, due only at its lease's end
   * (the call may act until this process exits: a taker would run it again, or ask before it answered).
   */
  private async release(run: ActiveRun): Promise<void> {
    const callInFlight = run.control.live > 0 || run.control.abandoned > 0;
    run.control.halt({ kind: 'released' }); // its own unwinding then writes nothing
    await this.executor.release(run, false, 'drain', callInFlight);
  }
}
