import { createHash } from 'node:crypto';
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
import type { CheckpointWrite, ClaimedRun, Fence, LeaseService } from '../services/lease.service';
import type { RunWrites } from '../services/run-writes.service';
import { executeCommand } from './command-step';
import { toStoredJson } from '../util/json';
import { crashPoint } from './crash-points';
import { pausePoint, PausePointName } from './pause-points';
import { withRetry, withTimeout } from './retry';
import { RunContext, RunContextHost } from './run-context';
import { runStorage, RunFrame, StepHost } from './run-storage';
import { RunSuspended } from './run-suspended';
import { sleepStep, waitForSignalStep } from './wait-step';

/** A command row as loaded for replay. */
export interface CommandRow {
  status: string;
  result: unknown;
  error: { message?: string } | null;
  resolution: string | null;
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
 * One claimed run being driven by this worker: replays recorded steps from memory, executes and
 * commits new ones (one fenced statement each), and records ctx.now()/uuid()/random().
 * @internal
 */
export class ActiveRun implements StepHost, RunContextHost {
  readonly context = new RunContext(this);
  private readonly abort = new AbortController();
  private nextIndex = 0;
  private pending: CheckpointWrite[] = [];
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
    private readonly recorded: Map<number, { name: string; output: unknown }>,
    readonly commands: Map<string, CommandRow>,
    readonly lease: LeaseService,
    readonly writes: RunWrites,
    readonly options: ResolvedDurableOptions,
  ) {
    this.cancelRequested = claim.cancelRequested;
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
    const out = this.pending;
    this.pending = [];
    return out;
  }

  /** Stops the run: later steps throw `reason`, and the AbortSignal fires. */
  stop(reason: StopReason): void {
    if (!this.stopReason) this.stopReason = reason;
    if (!this.abort.signal.aborted) this.abort.abort(reason);
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

  private nonDeterminism(index: number, recorded: string, requested: string): NonDeterminismError {
    const err = new NonDeterminismError(this.runId, index, recorded, requested);
    this.stop(err);
    return err;
  }

  /** The next step index (steps, commands, recorded values and waits share one sequence). */
  allocIndex(): number {
    return this.nextIndex++;
  }

  /** The checkpoint recorded at `index`, if any; a different name there is non-determinism. */
  recordedAt(index: number, name: string): { output: unknown } | undefined {
    const rec = this.recorded.get(index);
    if (rec && rec.name !== name) throw this.nonDeterminism(index, rec.name, name);
    return rec;
  }

  /** Remembers a checkpoint this claim wrote, so a later read in the same claim sees it. */
  remember(index: number, name: string, output: unknown): void {
    this.recorded.set(index, { name, output });
    this.progressed = true;
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

  /** Runs a fenced write; on LeaseLostError the run stops for good; a cancel flag is remembered. */
  async fenced<T extends object>(write: () => Promise<T>, what = 'write'): Promise<T> {
    try {
      await this.pause('before-write', what);
      const out = await write();
      await this.pause('after-write', what);
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
    if (!this.observers || this.recorded.has(this.nextIndex))
      return executeCommand(this, meta, args, call, lookup);
    const info = this.stepInfo(this.nextIndex, meta.name, 'command');
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

  async executeStep(meta: StepMetadata, call: () => unknown): Promise<unknown> {
    this.checkActive();
    const index = this.allocIndex();
    const rec = this.recordedAt(index, meta.name);
    if (rec) return rec.output;
    if (!this.observers) return this.runStep(meta, index, call);
    return this.observers.step(this.stepInfo(index, meta.name, meta.kind), () =>
      this.runStep(meta, index, call),
    );
  }

  /** Executes a step not yet recorded: `started` mark (model/tool), the call with retries, the commit. */
  private async runStep(meta: StepMetadata, index: number, call: () => unknown): Promise<unknown> {
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
      await this.fenced(() =>
        this.lease.writeStep(
          this.fence,
          started,
          this.takePending(),
          event,
          { step: index, name: meta.name },
          false,
        ),
      );
    }
    const policy = { ...this.options.defaultRetry, ...meta.retry };
    const frame: RunFrame = {
      host: this,
      context: this.context,
      step: { index, name: meta.name, derived: 0 },
    };
    const output = await withRetry(policy, this.signal, async () => {
      await this.pause('before-call', `step:${meta.name}`);
      return runStorage.run(frame, () =>
        withTimeout(Promise.resolve().then(call), meta.timeoutMs, meta.name),
      );
    });
    if (meta.kind === 'model') crashPoint('after-model-output', index);
    this.checkActive(false);
    const json = toStoredJson(output, `output of step "${meta.name}"`, this.options.limits.maxOutputBytes);
    const usage = meta.kind === 'model' ? modelMeta(output) : null;
    const metaJson = usage && JSON.stringify(usage);
    const done: RunCursor = { step: index, name: meta.name, status: 'done', attempt, item: null };
    const writes = [...this.takePending(), { index, name: meta.name, outputJson: json, metaJson }];
    const payload = { step: index, name: meta.name, kind: meta.kind, ...usage };
    crashPoint('before-step-commit', index);
    await this.fenced(() =>
      this.lease.writeStep(this.fence, done, writes, 'run.checkpoint_saved', payload, true),
    );
    crashPoint('after-step-commit', index);
    this.progressed = true;
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
    if (!step) throw new Error('ctx.progress() must be called inside a @DurableStep method');
    this.checkActive(false);
    const cursor: RunCursor = {
      step: step.index,
      name: step.name,
      status: 'started',
      attempt: this.attempt,
      item,
      partial,
    };
    await this.fenced(() => this.lease.progress(this.fence, cursor));
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
