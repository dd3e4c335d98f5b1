import { NonDeterminismError } from '../errors/non-determinism.error';
import type { CommandContext, CommandMetadata, LookupResult } from '../interfaces/command.interface';
import type { WaitForSignalOptions } from '../interfaces/command.interface';
import type { RunCursor, WorkflowClass } from '../interfaces/run.interface';
import type { StepMetadata, WorkflowMetadata } from '../interfaces/step-options.interface';
import type { DurableObservers } from './durable-observers';
import type { RunAttemptInfo, StepInfo } from '../interfaces/durable-observer.interface';
import type { ResolvedDurableOptions } from '../options/durable-execution-options.interface';
import { ClaimedRun, fenceOf } from '../store/run-state/claim-runs';
import type { CheckpointWrite, Fence } from '../store/run-state/fence';
import type { CommandRow, RecordedStep, ReplayRecord } from '../store/run-state/load-replay';
import { CLEANUP_BASE, phaseOf, reservedOf, seqFloor } from './cleanup-phase';
import type { RunStateStore } from '../store/run-state/run-state.store';
import { LeaseClock } from './lease-clock';
import { pausePoint, PausePointName } from './pause-points';
import { ReplayLog } from './replay-log';
import { RunContext, RunContextHost } from './run-context';
import { RunControl } from './run-control';
import { runStorage, RunFrame, StepHost } from './run-storage';
import { RunSuspended } from './run-stop';
import { commandCall } from './steps/command-step';
import { executeStep } from './steps/compute-step';
import { executeTransaction, TransactionEnv } from './steps/transaction-step';
import type { TransactionMetadata } from '../interfaces/transaction.interface';
import type { ReplayOnly, StepEnv } from './steps/step-env';
import * as values from './steps/step-values';
import { sleepStep, waitForSignalStep } from './steps/wait-step';
import { WaitBoard } from './wait-board';
import { fencedWrite } from './fenced-write';
import { HeldStep, writeHeld } from './held-commit';
import { startChildStep, waitForChildStep } from './steps/child-step';
import { deprecatePatchStep, patchedStep } from './steps/patch-step';
import type { ChildRun, StartChildOptions, WaitForChildOptions } from '../interfaces/child.interface';

/**
 * One claimed run being driven by this worker, wiring its parts: the replay log (indexes, recorded
 * results in delivery order, pending values), run control (stop, abort, drain, cancel), the lease
 * clock, and the store's fenced writes. The step kinds (compute, command, wait) are siblings in
 * `steps/` that take this run as their narrow `StepEnv`.
 * @internal
 */
export class ActiveRun implements StepHost, RunContextHost, StepEnv {
  readonly context = new RunContext(this);
  /** The replay log of the phase being driven (`run()`, or the cleanup after a cancel). */
  log: ReplayLog;
  readonly control: RunControl;
  readonly lease: LeaseClock;
  /** The pending waits of `run()` (sleeps, signals, children). */
  readonly board: WaitBoard = new WaitBoard(this);
  readonly held: HeldStep = new HeldStep((c) => writeHeld(this, c)); // a last step commit, for the finish
  readonly fence: Fence;
  cursor: RunCursor;
  /** When this claim began, local clock: with `claim.dbNow` it gives the database clock. */
  private readonly claimedAt = Date.now();
  /** The record this claim was prepared with (read once per claim). */
  readonly loaded: ReplayRecord;
  /** Set for a replay check only (see ReplayChecker). */
  replayOnly?: ReplayOnly;
  /** What the workflow's run() threw, if it did (set by the executor). */
  endedWith: unknown = null;
  /** Set by the executor only when an observer is registered: otherwise steps are not timed at all. */
  observers?: DurableObservers;
  /** A kind's declaration where this worker registers it (a child started by name). */
  kindMeta?: (kind: string) => WorkflowMetadata | undefined;
  /** Where `@DurableTransaction` bodies open their transactions (set by the executor). */
  transactions?: TransactionEnv['transactions'];

  constructor(
    readonly claim: ClaimedRun,
    readonly workerId: string,
    recorded: Map<number, RecordedStep>,
    readonly commands: Map<string, CommandRow>,
    readonly store: RunStateStore,
    readonly options: ResolvedDurableOptions,
  ) {
    this.fence = fenceOf(claim, workerId);
    this.cursor = claim.cursor;
    this.loaded = { checkpoints: recorded, commands };
    // `run()` replays what it recorded below the cleanup's positions, never the cleanup's own.
    this.log = this.logOf(phaseOf(this.loaded, 'run'));
    this.control = new RunControl(claim.id, claim.cancelRequested, claim.cancelReason, (error) => {
      this.log.fail(error);
      this.board.fail(error);
    });
    this.control.onIdle = this.control.calls.onIdle = () => this.board.poke();
    this.lease = new LeaseClock(
      claim.id,
      claim.epoch,
      claim,
      options.worker.leaseTtlMs,
      this.control,
      () =>
        store.renew(this.fence).catch((err) => Promise.reject(this.control.storeFailed(err, 'a renewal'))),
      options.worker.fencedTransport ? options.worker.wireMarginMs : null,
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
  get timeline(): number {
    return this.claim.timeline;
  }
  get attempt(): number {
    return this.claim.attempts;
  }
  get signal(): AbortSignal {
    const frame = runStorage.getStore(); // inside one of its step bodies: that attempt's signal
    return (frame?.host === this && frame.signal?.()) || this.control.signal;
  }

  private logOf(record: ReplayRecord, phase?: { firstIndex: number; seqFloor: number }): ReplayLog {
    return new ReplayLog(
      record.checkpoints,
      (index, rec, requested, detail) =>
        this.control.halt({
          kind: 'non-determinism',
          error: new NonDeterminismError(this.claim.id, index, rec, requested, detail),
        }),
      reservedOf(record, this.claim.id, this.claim.generation),
      phase,
    );
  }

  /**
   * The cancelled run's cleanup phase begins: its own replay log (the cleanup's part of `record`,
   * positions from CLEANUP_BASE + 1, delivery order after everything `run()` recorded), and run
   * control that a cancel no longer stops. Values `run()` left pending were written with the marker.
   */
  enterCleanup(record: ReplayRecord): void {
    this.log.fail(new RunSuspended({ kind: 'ended' }));
    this.log = this.logOf(phaseOf(record, 'cleanup'), {
      firstIndex: CLEANUP_BASE + 1,
      seqFloor: seqFloor(record),
    });
    this.control.beginCleanup();
  }

  /** The attempt is over: replay timers are cleared. */
  close(): void {
    this.lease.close();
    this.board.close();
    this.log.fail(this.control.error ?? new RunSuspended({ kind: 'ended' }));
  }

  dbNow(): number {
    return new Date(this.claim.dbNow).getTime() + (Date.now() - this.claimedAt);
  }

  fenced<T extends object>(
    write: () => Promise<T>,
    what: string,
    carried: CheckpointWrite[] = [],
  ): Promise<T> {
    return fencedWrite(this, write, what, carried);
  }

  pause(point: PausePointName, detail?: string): Promise<void> | undefined {
    const { runId, epoch, timeline, workerId } = this;
    return pausePoint({ point, runId, epoch, timeline, workerId, detail });
  }

  frame(step?: RunFrame['step']): RunFrame {
    return { host: this, context: this.context, step };
  }

  /** What observers are told about this attempt. */
  attemptInfo(): RunAttemptInfo {
    const { runId, kind, epoch, timeline, attempt, workerId } = this;
    return { runId, kind, epoch, timeline, attempt, workerId };
  }

  stepInfo(index: number, name: string, stepKind: StepInfo['stepKind']): StepInfo {
    return { run: this.attemptInfo(), index, name, stepKind };
  }

  misuse(error: Error): Error {
    return this.control.halt({ kind: 'usage', error });
  }

  /** Drives `workflow.run(input, ctx)` inside this run's async-local frame. */
  execute(fn: () => unknown): Promise<unknown> {
    return runStorage.run(this.frame(), async () => fn());
  }

  executeStep(meta: StepMetadata, call: () => unknown, args: unknown[] = []): Promise<unknown> {
    return this.control.calls.calling(executeStep(this, meta, call, args));
  }

  executeTransaction(meta: TransactionMetadata, call: () => unknown, args: unknown[] = []): Promise<unknown> {
    return this.control.calls.calling(executeTransaction(this, meta, call, args));
  }
  executeCommand(
    meta: CommandMetadata,
    args: unknown,
    call: (ctx: CommandContext) => unknown,
    lookup?: (command: string, key: string) => Promise<LookupResult>,
  ): Promise<unknown> {
    return commandCall(this, meta, args, call, lookup);
  }

  sleep(ms: number): Promise<void> {
    return sleepStep(this, ms);
  }

  waitForSignal(name: string, options: WaitForSignalOptions): Promise<unknown> {
    return waitForSignalStep(this, name, options);
  }

  startChild(target: string | WorkflowClass, input: unknown, options: StartChildOptions): Promise<ChildRun> {
    return this.control.calls.calling(startChildStep(this, target, input, options));
  }
  waitForChild(child: ChildRun, options: WaitForChildOptions): Promise<unknown> {
    return waitForChildStep(this, child, options);
  }
  patched(id: string): boolean {
    return patchedStep(this, id);
  }
  deprecatePatch(id: string): void {
    deprecatePatchStep(this, id);
  }
  setTags(tags: Record<string, string>): Promise<void> {
    return values.setTagsStep(this, tags);
  }
  emit(topic: string, data: unknown): Promise<void> {
    return this.control.calls.calling(values.emitStep(this, topic, data));
  }
  continueAsNew(input: unknown): Promise<never> {
    return values.continueAsNewStep(this, input);
  }
  record<T>(name: string, make: () => T, derive: (seed: Buffer) => T): T {
    return values.recordValue(this, name, make, derive);
  }
  progress(item: number, partial: unknown): Promise<void> {
    return values.progress(this, item, partial);
  }
  resumePoint(): { item: number; partial: unknown } | null {
    return values.resumePoint(this);
  }
}
