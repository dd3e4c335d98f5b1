/** One run attempt: one claim of a run by a worker, until the run rests again. */
export interface RunAttemptInfo {
  runId: string;
  /** The workflow kind. */
  kind: string;
  /** The claim's fencing token: a second epoch of the same run is a resume (crash, drain, park). */
  epoch: number;
  /** The server's WAL timeline at the claim (a failover starts a new one): the token is (timeline, epoch). */
  timeline: number;
  /** Claims without progress so far, this one included. */
  attempt: number;
  workerId: string;
}

/**
 * How a run attempt ended: a terminal status, back to waiting with backoff (`retry_scheduled`), parked
 * (approval, sleep, signal, manual in-doubt), released on drain, or taken over (`lease_lost`).
 * `unrecorded` when the final write itself failed (the reconciler recovers the run).
 */
export type RunAttemptOutcome =
  | 'succeeded'
  | 'failed'
  | 'cancelled'
  | 'dead_lettered'
  | 'retry_scheduled'
  | 'parked'
  | 'released'
  | 'lease_lost'
  | 'unrecorded';

/** One step or command executed (not replayed) in a run attempt. */
export interface StepInfo {
  run: RunAttemptInfo;
  index: number;
  name: string;
  stepKind: 'compute' | 'model' | 'tool' | 'command' | 'transaction';
}

/** `committed` (checkpoint written), `failed` (threw), or `parked` (approval or in-doubt park). */
export type StepOutcome = 'committed' | 'failed' | 'parked';

/** One claim round of a worker; a run a start handed to it (hand-off) is a round of its own, with that run. */
export interface WorkerTickInfo {
  workerId: string;
  /** Kinds of the runs claimed in this round (one entry per run). */
  claimedKinds: string[];
  /** Set when the claim statement failed (the loop backs off and tries again). */
  error?: unknown;
}

/** What one reconciler sweep did. */
export interface ReconcileOutcome {
  requeued: number;
  deadLettered: number;
}

/**
 * Receives the engine's instrumentation events. Every method is optional; `wrap*` methods must call
 * `next()` exactly once and return its promise (tracing uses them to make a span the active context).
 * Register with `DurableObservers.add()`. Methods run on the hot path: keep them synchronous and cheap.
 */
export interface DurableObserver {
  runAttemptStarted?(info: RunAttemptInfo): void;
  wrapRunAttempt?(info: RunAttemptInfo, next: () => Promise<void>): Promise<void>;
  runAttemptEnded?(info: RunAttemptInfo, outcome: RunAttemptOutcome, durationMs: number): void;
  wrapStep?<T>(info: StepInfo, next: () => Promise<T>): Promise<T>;
  stepEnded?(info: StepInfo, outcome: StepOutcome, durationMs: number, error?: unknown): void;
  workerTicked?(tick: WorkerTickInfo): void;
  reconciled?(result: ReconcileOutcome): void;
}
