import type { WorkflowMetadata } from '../../interfaces/step-options.interface';
import type { RunCursor } from '../../interfaces/run.interface';
import type { ResolvedDurableOptions } from '../../options/durable-execution-options.interface';
import type { StepInfo } from '../../interfaces/durable-observer.interface';
import type { DurableObservers } from '../durable-observers';
import type { CheckpointWrite, Fence } from '../../store/run-state/fence';
import type { CommandRow } from '../../store/run-state/load-replay';
import type { RunStateStore } from '../../store/run-state/run-state.store';
import type { HeldStep } from '../held-commit';
import type { LeaseClock } from '../lease-clock';
import type { PausePointName } from '../pause-points';
import type { ReplayLog } from '../replay-log';
import type { RunControl } from '../run-control';
import type { RunFrame } from '../run-storage';
import type { WaitOutcome, WaitSpec } from '../wait-types';

/**
 * What a step (compute, command, wait) may use of the run it belongs to: the claim's identity, its
 * replay log, run control, lease clock, and the store's fenced writes through `fenced`. The step kinds
 * are siblings that take this narrow environment; none imports the run.
 * @internal
 */
export interface StepEnv {
  readonly runId: string;
  readonly kind: string;
  readonly epoch: number;
  /** Claims without progress so far, this one included (the claim's attempt number). */
  readonly attempt: number;
  readonly workerId: string;
  readonly fence: Fence;
  readonly options: ResolvedDurableOptions;
  readonly log: ReplayLog;
  readonly control: RunControl;
  readonly lease: LeaseClock;
  /** The run's pending waits (sleeps, signals, children): JavaScript's timers and a mailbox. */
  readonly board: { wait(spec: WaitSpec): Promise<WaitOutcome>; readonly size: number };
  readonly store: RunStateStore;
  /** A step's commit held to ride on the finish: written alone before anything else leaves. */
  readonly held: HeldStep;
  /** The run's commands as loaded for replay (by idempotency key). */
  readonly commands: ReadonlyMap<string, CommandRow>;
  /** Set in a replay check: nothing is executed or written, a call past the record stops the check. */
  readonly replayOnly?: ReplayOnly;
  /** Registered observers, or undefined (then steps are not timed at all). */
  readonly observers?: DurableObservers;
  /** A kind's `@DurableWorkflow` declaration where this worker registers it. */
  readonly kindMeta?: (kind: string) => WorkflowMetadata | undefined;
  /** The cursor the run was claimed with (moved by ctx.progress). */
  cursor: RunCursor;

  /**
   * Runs a fenced write: the lease counts as renewed from its send time, the pending values it
   * carried (`carried`, exactly those the statement writes) are durable, a cancel flag is remembered;
   * LeaseLostError stops the run for good.
   */
  fenced<T extends object>(write: () => Promise<T>, what: string, carried?: CheckpointWrite[]): Promise<T>;
  /** A test-only pause point of this run (inert unless a test installed a hook). */
  pause(point: PausePointName, detail?: string): Promise<void> | undefined;
  /** The database clock now, from the claim's `now()` plus local time elapsed since. */
  dbNow(): number;
  /** The async-local frame for user code of this run (inside step `step` when given). */
  frame(step?: RunFrame['step']): RunFrame;
  /** What observers are told about a step at `index`. */
  stepInfo(index: number, name: string, stepKind: StepInfo['stepKind']): StepInfo;
}

/**
 * Resolves when replay is over: nothing new runs before every recorded result was delivered. In a
 * replay check (`env.replayOnly`) nothing new runs at all: the call at `index` is where the record
 * ends, and the check stops there.
 */
export function goLive(env: StepEnv, index: number, name: string): Promise<void> | undefined {
  if (env.replayOnly) {
    const only = env.replayOnly;
    return env.log.replayDone().then(() => {
      throw only.reached(index, name);
    });
  }
  return env.log.replaying ? env.log.replayDone() : undefined;
}

/** A replay that may only read the record (the replay check): a call past its end stops it. */
export interface ReplayOnly {
  /** The replay asked for `name` at `index`, which the record does not hold: returns the error to throw. */
  reached(index: number, name: string): Error;
}

/**
 * The run's cursor at step `index` of this claim: `started` (a mark before a call leaves the process,
 * with the intra-step position when there is one) or `done` (committed). A `started` cursor keeps the
 * step's failed attempts recorded so far (see step-attempts.ts).
 */
export function cursorAt(
  env: StepEnv,
  index: number,
  name: string,
  status: RunCursor['status'],
  position: { item: number | null; partial?: unknown } = { item: null },
): RunCursor {
  const c = env.cursor;
  const cursor: RunCursor = { step: index, name, status, attempt: env.attempt, ...position };
  if (status === 'started' && c.failures && c.step === index && c.name === name && c.status === 'started')
    cursor.failures = c.failures;
  return cursor;
}
