import { createHash } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { LeaseLostError } from '../errors/lease-lost.error';
import { NonDeterminismError } from '../errors/non-determinism.error';
import { RunCancelledError } from '../errors/run-cancelled.error';
import type { RunCursor } from '../interfaces/run.interface';
import type { StepMetadata } from '../interfaces/step-options.interface';
import type { ResolvedDurableOptions } from '../options/durable-execution-options.interface';
import type {
  CommandContext,
  CommandMetadata,
  LookupResult,
  WaitForSignalOptions,
} from '../interfaces/command.interface';
import type { DurableObservers } from '../observability/durable-observers';
import type { RunAttemptOutcome, StepInfo } from '../observability/durable-observer.interface';
import type { CheckpointWrite, ClaimedRun, Fence, LeaseService } from '../store/lease.service';
import type { RunWrites } from '../store/run-writes.service';
import { executeCommand } from './command-step';
import { toStoredJson } from '../util/json';
import { crashPoint } from './crash-points';
import { pausePoint, PausePointName } from './pause-points';
import { withRetry, withTimeout } from './retry';
import { RunContext, RunContextHost } from './run-context';
import { runStorage, RunFrame, StepHost } from './run-storage';
import { RunSuspended } from './run-suspended';
import { argsJson, callFingerprint, RecordedStep, ReplayLog } from './replay-log';
import { sleepStep, waitForSignalStep } from './wait-step';
import { DurableUsageError } from '../errors/durable-usage.error';

/** A command row as loaded for replay. */
export interface CommandRow {
  status: string;
  result: unknown;
  error: { message?: string } | null;
  resolution: string | null;
  /** The arguments it was reserved with. */
  payload?: unknown;
}

type StopReason = LeaseLostError | NonDeterminismError | RunCancelledError | RunSuspended;

/** Token usage and provider request id of a model step, kept in the checkpoint's meta. */
function modelMeta(output: unknown): { usage: unknown; requestId: unknown } | null {
  if (!output || typeof output !== 'object') return null;
  const o = output as Record<string, unknown>;
  const requestId = o.requestId ?? o.request_id ?? o.id;
  if (o.usage === undefined && requestId === undefined) return null;
  return { usage: o.usage ?? null, requestId: requestId ?? null };
}

/**
 * One claimed run being driven by this worker: replays recorded steps from memory (in their recorded
 * delivery order, see ReplayLog), executes and commits new ones (one fenced statement each), records
 * ctx.now()/uuid()/random(), and keeps a local, monotonic view of its lease: nothing leaves the
 * process unless the lease is known to hold for a margin (else it is re-confirmed by a fenced
 * statement, or the run stops).
 * @internal
 */
export class ActiveRun implements StepHost, RunContextHost {
  readonly context = new RunContext(this);
  private readonly abort = new AbortController();
  readonly log: ReplayLog;
  private pending: CheckpointWrite[] = [];
  /** `performance.now()` until which the lease certainly holds (from the send time of its last renewal). */
  private leaseDeadline: number;
  /** Set when the run must stop whatever user code does with the errors we throw. */
  stopReason: StopReason | null = null;
  /** When this claim began, local clock: with `claim.dbNow` it gives the database clock. */
  private readonly claimedAt = Date.now();
  cancelRequested: boolean;
  /** Set by a draining worker: the run stops (and is released) at its next step boundary. */
  draining = false;
  /** Set when the run parked itself with a due time (sleep, signal timeout): the worker wakes it then. */
  parkedUntil: Date | null = null;
  /** A step committed during this claim (attempts were reset in the row). */
  progressed = false;
  /** How this attempt ended (set by the executor), for observers. */
  outcome: RunAttemptOutcome | null = null;
  /** Set by the executor only when an observer is registered: otherwise steps are not timed at all. */
  observers?: DurableObservers;

  constructor(
    readonly claim: ClaimedRun,
    readonly workerId: string,
    recorded: Map<number, RecordedStep>,
    readonly commands: Map<string, CommandRow>,
    readonly lease: LeaseService,
    readonly writes: RunWrites,
    readonly options: ResolvedDurableOptions,
  ) {
    this.cancelRequested = claim.cancelRequested;
    this.leaseDeadline = claim.sentAt + options.worker.leaseTtlMs;
    this.log = new ReplayLog(recorded, (index, name) =>
      this.stop(
        new NonDeterminismError(this.runId, index, name, name, 'was never asked for again (another path)'),
      ),
    );
  }

  /** This claim's identity in the worker's bookkeeping: a run can be claimed again under a new epoch. */
  get claimKey(): string {
    return `${this.claim.id}:${this.claim.epoch}`;
  }

  get runId(): string {
    return this.claim.id;
  }
  get kind(): string {
    return this.claim.kind;
  }
  get epoch(): number {
    return this.claim.epoch;
  }
  get attempt(): number {
    return this.claim.attempts;
  }
  get signal(): AbortSignal {
    return this.abort.signal;
  }
  get fence(): Fence {
    return { runId: this.claim.id, workerId: this.workerId, epoch: this.claim.epoch };
  }
  /** Recorded values not yet written; flushed by the next fenced write. */
  takePending(): CheckpointWrite[] {
    // Not cleared here: a value stays pending (and rides along on every fenced write) until a write
    // carrying it has committed. With parallel branches, another branch's write may otherwise reach an
    // external call while the one write that carries the value is still in flight (or frozen).
    return this.pending.slice();
  }

  /** Stops the run: later steps throw `reason`, the AbortSignal fires, replay waiters reject. */
  stop(reason: StopReason): void {
    if (!this.stopReason) this.stopReason = reason;
    if (!this.abort.signal.aborted) this.abort.abort(reason);
    this.log.fail(this.stopReason);
    this.idleWaiters.splice(0).forEach((wake) => wake());
  }

  /** The attempt is over: replay timers are cleared. */
  close(): void {
    this.log.fail(this.stopReason ?? new RunSuspended('attempt ended'));
  }

  /** A renewal of this lease was sent at `sentAt` (performance.now()) and succeeded. */
  leaseRenewed(sentAt: number): void {
    this.leaseDeadline = Math.max(this.leaseDeadline, sentAt + this.options.worker.leaseTtlMs);
  }

  /** When the lease ends at the latest, by this process's clock (for the fencing token of a command). */
  leaseExpiresAt(): Date {
    return new Date(Date.now() + (this.leaseDeadline - performance.now()));
  }

  /**
   * Called right before anything leaves the process (a step body, a command, a lookup): the lease
   * must hold for at least a third of its TTL by the local monotonic clock, or be re-confirmed by a
   * fenced statement. A process that wakes past its lease (a freeze, a GC pause) stops here.
   */
  ensureLease(what: string): Promise<void> | undefined {
    if (this.leaseHoldsWithMargin()) {
      this.checkActive(false);
      return undefined; // the common case: no promise, no await
    }
    return this.renewBeforeCall(what);
  }

  /** At least a third of the TTL left by this process's monotonic clock. */
  private leaseHoldsWithMargin(): boolean {
    return performance.now() < this.leaseDeadline - this.options.worker.leaseTtlMs / 3;
  }

  /** Renews (fenced) until the margin holds again; two renewals that still leave it short mean lost. */
  private async renewBeforeCall(what: string): Promise<void> {
    for (let tries = 0; !this.leaseHoldsWithMargin(); tries++) {
      if (this.stopReason) throw this.stopReason;
      const sentAt = performance.now();
      const { alive, cancelRequested } =
        tries < 2 ? await this.lease.renew(this.fence) : { alive: false, cancelRequested: false };
      if (!alive) {
        const err = new LeaseLostError(this.runId, this.epoch, `the lease check before ${what}`);
        this.stop(err);
        throw err;
      }
      if (cancelRequested) this.cancelRequested = true;
      this.leaseRenewed(sentAt);
    }
    this.checkActive(false);
  }

  /** Live calls (step bodies, dispatches, lookups) of this attempt not yet settled. */
  private liveOps = 0;
  private idleWaiters: Array<() => void> = [];

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
    while (this.liveOps > 0 && !this.stopReason) await new Promise<void>((r) => this.idleWaiters.push(r));
  }

  /** Resolves when replay is over: nothing new runs before every recorded result was delivered. */
  goLive(): Promise<void> | undefined {
    return this.log.replaying ? this.log.replayDone() : undefined;
  }

  /**
   * Called at every step boundary: a lost lease or a cancellation ends the run here. A drain ends it
   * only before a step starts (`startingStep`), never between a finished step and its commit.
   */
  checkActive(startingStep = true): void {
    if (!this.stopReason && this.draining && startingStep) this.stop(new RunSuspended('drain', true));
    if (!this.stopReason && this.cancelRequested)
      this.stop(new RunCancelledError(this.runId, this.claim.cancelReason));
    if (this.stopReason) throw this.stopReason;
  }

  /** Stops the run for a call at `index` that does not match what was recorded there. */
  nonDeterminismAt(index: number, name: string, detail: string): NonDeterminismError {
    return this.nonDeterminism(index, name, name, detail);
  }

  private nonDeterminism(
    index: number,
    recorded: string,
    requested: string,
    detail?: string,
  ): NonDeterminismError {
    const err = new NonDeterminismError(this.runId, index, recorded, requested, detail);
    this.stop(err);
    return err;
  }

  /** The next step index (steps, commands, recorded values and waits share one sequence). */
  allocIndex(): number {
    return this.log.allocIndex();
  }

  /**
   * The checkpoint recorded at `index`, if any. Another name there, or the same name called with other
   * arguments (when both fingerprints are known), is non-determinism: the run stops before any call.
   */
  recordedAt(index: number, name: string, fingerprint: string | null = null): RecordedStep | undefined {
    const rec = this.log.at(index);
    if (rec && rec.name !== name) throw this.nonDeterminism(index, rec.name, name);
    if (rec && rec.fingerprint && fingerprint && rec.fingerprint !== fingerprint)
      throw this.nonDeterminism(index, rec.name, name, 'was called with other arguments');
    return rec;
  }

  /** The database clock now, from the claim's `now()` plus local time elapsed since. */
  dbNow(): number {
    return new Date(this.claim.dbNow).getTime() + (Date.now() - this.claimedAt);
  }

  /** Records that the run is parked (already written) and unwinds the workflow. */
  suspend(reason: string): never {
    const s = new RunSuspended(reason);
    this.stop(s);
    throw s;
  }

  /**
   * Runs a fenced write; on LeaseLostError the run stops for good; a cancel flag is remembered. Every
   * fenced write that leaves the run `running` also renews its lease from the moment it was sent.
   */
  async fenced<T extends object>(write: () => Promise<T>, what = 'write'): Promise<T> {
    const carried = this.pending.length ? this.pending.slice() : null;
    try {
      const before = this.pause('before-write', what);
      if (before) await before;
      const sentAt = performance.now();
      const out = await write();
      this.leaseRenewed(sentAt);
      if (carried) this.pending = this.pending.filter((p) => !carried.includes(p)); // durable now
      const after = this.pause('after-write', what);
      if (after) await after;
      if ((out as { cancelRequested?: boolean }).cancelRequested) this.cancelRequested = true;
      return out;
    } catch (err) {
      if (err instanceof LeaseLostError) this.stop(err);
      throw err;
    }
  }

  /** A test-only pause point of this run (inert unless a test installed a hook). */
  pause(point: PausePointName, detail?: string): Promise<void> | undefined {
    return pausePoint({ point, runId: this.runId, epoch: this.epoch, workerId: this.workerId, detail });
  }

  executeCommand(
    meta: CommandMetadata,
    args: unknown,
    call: (ctx: CommandContext) => unknown,
    lookup?: (command: string, key: string) => Promise<LookupResult>,
  ): Promise<unknown> {
    // A command already recorded at the next index is a replay: no span, no timing.
    if (!this.observers || this.log.at(this.log.peekIndex()))
      return executeCommand(this, meta, args, call, lookup);
    const info = this.stepInfo(this.log.peekIndex(), meta.name, 'command');
    return this.observers.step(info, () => executeCommand(this, meta, args, call, lookup));
  }

  private stepInfo(index: number, name: string, stepKind: StepInfo['stepKind']): StepInfo {
    const run = {
      runId: this.runId,
      kind: this.kind,
      epoch: this.epoch,
      attempt: this.attempt,
      workerId: this.workerId,
    };
    return { run, index, name, stepKind };
  }

  sleep(ms: number): Promise<void> {
    return sleepStep(this, ms);
  }

  waitForSignal(name: string, options: WaitForSignalOptions): Promise<unknown> {
    return waitForSignalStep(this, name, options);
  }

  /** Drives `workflow.run(input, ctx)` inside this run's async-local frame. */
  execute(fn: () => unknown): Promise<unknown> {
    const frame: RunFrame = { host: this, context: this.context };
    return runStorage.run(frame, async () => fn());
  }

  async executeStep(meta: StepMetadata, call: () => unknown, args: unknown[] = []): Promise<unknown> {
    this.checkActive();
    const index = this.allocIndex();
    const fingerprint = callFingerprint(meta.name, argsJson(args));
    const rec = this.recordedAt(index, meta.name, fingerprint);
    if (rec) {
      await this.log.replayed(index);
      return rec.output;
    }
    const live = this.goLive();
    if (live) await live;
    if (!this.observers) return this.track(this.runStep(meta, index, call, fingerprint));
    return this.track(
      this.observers.step(this.stepInfo(index, meta.name, meta.kind), () =>
        this.runStep(meta, index, call, fingerprint),
      ),
    );
  }

  /** Executes a step not yet recorded: `started` mark (model/tool), the call with retries, the commit. */
  private async runStep(
    meta: StepMetadata,
    index: number,
    call: () => unknown,
    fingerprint: string | null,
  ): Promise<unknown> {
    const attempt = this.claim.attempts;
    const prior = this.claim.cursor;
    const resumed = prior.step === index && prior.name === meta.name && prior.status === 'started';
    if (meta.kind !== 'compute') {
      const started: RunCursor = {
        step: index,
        name: meta.name,
        status: 'started',
        attempt,
        item: resumed ? prior.item : null,
        partial: resumed ? prior.partial : undefined,
      };
      const event = meta.kind === 'model' ? 'model.call_started' : 'step.started';
      await this.fenced(
        () =>
          this.lease.writeStep(
            this.fence,
            started,
            this.takePending(),
            event,
            { step: index, name: meta.name },
            false,
          ),
        event,
      );
    }
    const policy = { ...this.options.defaultRetry, ...meta.retry };
    const frame: RunFrame = {
      host: this,
      context: this.context,
      step: { index, name: meta.name, derived: 0 },
    };
    const output = await withRetry(policy, this.signal, async () => {
      const paused = this.pause('before-call', `step:${meta.name}`);
      if (paused) await paused;
      const renewing = this.ensureLease(`step ${meta.name}`);
      if (renewing) await renewing;
      return runStorage.run(frame, () =>
        withTimeout(Promise.resolve().then(call), meta.timeoutMs, meta.name),
      );
    });
    if (meta.kind === 'model') crashPoint('after-model-output', index);
    this.checkActive(false);
    // A step that returns nothing records null: its effect happened, and replay returns the same.
    const json = toStoredJson(
      output === undefined ? null : output,
      `output of step "${meta.name}"`,
      this.options.limits.maxOutputBytes,
    );
    const usage = meta.kind === 'model' ? modelMeta(output) : null;
    const metaJson = usage && JSON.stringify(usage);
    const done: RunCursor = { step: index, name: meta.name, status: 'done', attempt, item: null };
    const seq = this.log.takeSeq();
    const writes = [
      ...this.takePending(),
      { index, name: meta.name, outputJson: json, metaJson, seq, fingerprint },
    ];
    const payload = { step: index, name: meta.name, kind: meta.kind, ...usage };
    crashPoint('before-step-commit', index);
    try {
      await this.fenced(
        () => this.lease.writeStep(this.fence, done, writes, 'run.checkpoint_saved', payload, true),
        'run.checkpoint_saved',
      );
    } catch (err) {
      this.log.abandon(seq);
      throw err;
    }
    crashPoint('after-step-commit', index);
    this.progressed = true;
    await this.log.deliverLive(seq);
    // The JSON round trip, so the first execution sees exactly what every replay will see. This index
    // is never read again in this claim, so nothing needs to be remembered.
    return JSON.parse(json);
  }

  record<T>(name: string, make: () => T, derive: (seed: Buffer) => T): T {
    const frame = runStorage.getStore();
    if (frame?.step) {
      const seed = createHash('sha256')
        .update(`${this.runId}:${frame.step.index}:${frame.step.derived++}`)
        .digest();
      return derive(seed);
    }
    this.checkActive();
    const index = this.allocIndex();
    const rec = this.recordedAt(index, name);
    if (rec) return rec.output as T;
    const value = make();
    this.pending.push({ index, name, outputJson: JSON.stringify(value) });
    return value;
  }

  async progress(item: number, partial: unknown): Promise<void> {
    const step = runStorage.getStore()?.step;
    if (!step) throw new DurableUsageError('ctx.progress() must be called inside a @DurableStep method');
    this.checkActive(false);
    // Refused here (once, not retried) rather than by PostgreSQL on every claim.
    toStoredJson(
      partial,
      `ctx.progress() partial of step "${step.name}"`,
      this.options.limits.maxOutputBytes,
    );
    const cursor: RunCursor = {
      step: step.index,
      name: step.name,
      status: 'started',
      attempt: this.attempt,
      item,
      partial,
    };
    await this.fenced(() => this.lease.progress(this.fence, cursor), 'progress');
    this.claim.cursor = cursor;
  }

  resumePoint(): { item: number; partial: unknown } | null {
    const step = runStorage.getStore()?.step;
    const c = this.claim.cursor;
    if (!step || c.step !== step.index || c.name !== step.name || c.status !== 'started' || c.item === null) {
      return null;
    }
    return { item: c.item, partial: c.partial ?? null };
  }
}
