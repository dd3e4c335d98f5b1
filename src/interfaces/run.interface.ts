import type { Stored } from './stored-types.interface';
import type { LimitScope } from './run-reads.interface';
import type { RunCursor } from './run-cursor.interface';
export type { RunCursor } from './run-cursor.interface';
/** Lifecycle state of a run. `dead_lettered` = attempts spent; re-drivable with `RunRepository.retry`. */
export type RunStatus =
  'pending' | 'running' | 'waiting' | 'succeeded' | 'failed' | 'cancelled' | 'dead_lettered';

/** Every run status. */
export const RUN_STATUSES: readonly RunStatus[] = [
  'pending',
  'running',
  'waiting',
  'succeeded',
  'failed',
  'cancelled',
  'dead_lettered',
];

/** Statuses from which a run never moves again on its own. */
export const TERMINAL_STATUSES: readonly RunStatus[] = ['succeeded', 'failed', 'cancelled', 'dead_lettered'];

/** A run as `RunRepository` returns it. */
export interface RunView<I = unknown, O = unknown> {
  id: string;
  kind: string;
  /**
   * The version of its kind it is pinned to (`@DurableWorkflow(kind, { version })`; 1 for unversioned
   * kinds), or null while no claim pinned it yet (started where the kind is not registered).
   */
  version: number | null;
  /** How many times it continued as new (`ctx.continueAsNew`) or was rewound in place; 0 for most runs. */
  generation: number;
  status: RunStatus;
  input: I;
  output: O | null;
  state: Record<string, unknown>;
  cursor: RunCursor;
  epoch: number;
  workerId: string | null;
  leaseExpiresAt: Date | null;
  availableAt: Date;
  priority: number;
  attempts: number;
  maxAttempts: number;
  idempotencyKey: string | null;
  cancelRequestedAt: Date | null;
  cancelReason: string | null;
  parkedReason: string | null;
  /** Its key for a per-key concurrency limit (`StartRunOptions.concurrencyKey`), or null. */
  concurrencyKey: string | null;
  /** Set while a due run is held back by a full concurrency or rate limit of its kind or key: which one. */
  limitedBy: LimitScope | null;
  /**
   * Held on non-determinism (`waiting`, no due time, `run.held`): it moves once code that replays it
   * is deployed and it is retried (`retry(id)`, `retryHeld(kind)`).
   */
  held: boolean;
  /** The run that started this one (`ctx.child`, `ctx.startChild`), or null. */
  parentId: string | null;
  /**
   * The run this one was forked from (`RunRepository.fork`) and the first position it executed itself
   * (`fromStep`; what it inherited lies before it), or null for a run that was started.
   */
  forkedFrom: { runId: string; fromStep: number } | null;
  /** Its tags (`StartRunOptions.tags`, `ctx.setTags`), or an empty object. */
  tags: Record<string, string>;
  error: { name?: string; code?: string; message: string; stack?: string; cause?: unknown } | null;
  createdAt: Date;
  updatedAt: Date;
  finishedAt: Date | null;
}

/** Options of `RunRepository.start`. */
export interface StartRunOptions {
  /** A second start with the same key returns the existing run instead of making another. */
  idempotencyKey?: string;
  /** Claims without progress before the run is dead-lettered. Default: workflow option, then module default. */
  maxAttempts?: number;
  /** Do not start before this time (database clock compares it). */
  runAt?: Date;
  /** Higher runs are claimed first. Default 0. */
  priority?: number;
  /**
   * The version of its kind the run is pinned to (only workers registering that version claim it).
   * Default: the newest version this process registers; where the kind is not registered, its first
   * claim pins it to the claiming worker's newest version.
   */
  version?: number;
  /**
   * The run's key for its kind's `perKeyConcurrency` (a tenant, a user). Default: the workflow's
   * `concurrencyKey(input)` when the kind is registered in this process; a producer-only process that
   * does not register the kind passes it here. Ignored by a kind without a per-key limit.
   */
  concurrencyKey?: string;
  /**
   * What the run is about, to find it later (`list({ tags })`, the admin API, the inspector): at most 16
   * `name: value` strings, e.g. `{ tenant: 'acme', order: 'PO-17' }`. The workflow can add more with
   * `ctx.setTags`.
   */
  tags?: Record<string, string>;
}

/** Result of `start`: the run and whether this call created it. */
export interface StartRunResult<I = unknown, O = unknown> {
  run: RunView<I, O>;
  created: boolean;
  /**
   * Waits for this run to end and returns its output, like `RunRepository.result(run.id, opts)`
   * (through NOTIFY; RunFailedError, ResultTimeoutError). Not enumerable: the result still serialises
   * as `{ run, created }`.
   */
  result(opts?: { timeoutMs?: number }): Promise<O>;
}

/** A `@DurableWorkflow` class: its `run(input, ctx)` gives a run's input and output types. */
export interface WorkflowClass<I = any, O = any> {
  new (...args: any[]): { run(input: I, ...rest: any[]): O | Promise<O> };
}

/** What a workflow's `onCancel(input, ctx, cancel)` is told about the cancel and the run before it. */
export interface RunCancelInfo {
  /** The reason given to `RunRepository.cancel(id, reason)`, or null. */
  reason: string | null;
  /**
   * What `run()` recorded before the cancel, in position order: steps (`name`) and commands
   * (`command:<name>`), each with its recorded output (for a failure: the stored error, `failed`).
   * A command that was never sent is not here; one whose outcome is unknown is listed in doubt by
   * `CommandGateway.listForRun(id, { status: 'in_doubt' })` once the run has ended.
   */
  completed: Array<{ index: number; name: string; output: unknown; failed: boolean }>;
}

/** The input type of a workflow class's `run()`. */
export type WorkflowInput<W> = W extends WorkflowClass<infer I, any> ? I : never;

/**
 * The output type of a workflow class's `run()` as a succeeded run's `output` holds it: stored as JSON,
 * so a `Date` it returns reads back as a string (`Stored`).
 */
export type WorkflowOutput<W> = W extends WorkflowClass<any, infer O> ? Stored<Awaited<O>> : never;

/** Filters of `RunRepository.list` (keyset pagination, newest first). */
export interface ListRunsQuery {
  status?: RunStatus | RunStatus[];
  kind?: string;
  /** Only the child runs of this run (`ctx.startChild`). */
  parentId?: string;
  /** Only runs with all of these tags (the newest page of one of them is read, through `ai_run_tags`). */
  tags?: Record<string, string>;
  /** Page size, 1..500. Default 50. */
  limit?: number;
  /** The `next` cursor of the previous page. */
  after?: string;
}

/**
 * Which of a run's events or checkpoints to read (`RunRepository.events`, `.checkpoints`). A position is
 * an event's `id` or a checkpoint's `stepIndex`. With neither `after` nor `before`: from the oldest.
 */
export interface RunHistoryQuery {
  /** Only those after this position, oldest first. */
  after?: number;
  /** Only those before this position, newest first (not with `after`). */
  before?: number;
  /** Newest first, from the newest (`before` implies it; not with `after`). */
  newestFirst?: boolean;
  /** At most this many, 1..1000. Default: all of them. */
  limit?: number;
}

/**
 * One version of a kind (`RunRepository.versions`): the unfinished runs pinned to it and the live workers
 * that run it. When no run holds a version any more, its class (or its workers) can go.
 */
export interface KindVersionView {
  kind: string;
  /** The version; null for runs not pinned yet (started where the kind is not registered, never claimed). */
  version: number | null;
  pending: number;
  waiting: number;
  running: number;
  /** Of `waiting`: held on non-determinism (`retryHeld(kind, { version })` once fixed code is deployed). */
  held: number;
  /** Live workers that register this version (presence rows renewed in the last three periods). */
  workers: number;
}

/** Options of `RunRepository.retryHeld`. */
export interface RetryHeldOptions {
  /** At most this many runs (default 1000). */
  limit?: number;
  /** Who retried them (kept in each `run.retried` event). */
  by?: string;
  /** Only runs pinned to this version of the kind (default: every version). */
  version?: number;
}

/** One page of runs. `next` is absent on the last page. */
export interface RunPage {
  items: RunView[];
  next?: string;
}

/** One entry of the append-only event trail. */
export interface RunEvent {
  id: number;
  runId: string;
  type: string;
  epoch: number;
  payload: Record<string, unknown>;
  createdAt: Date;
}

/**
 * One stored checkpoint. Step names starting with `$` are the engine's entries (recorded values such as
 * `ctx.now()`, waits, emits, patch markers); `command:<name>` is a command's outcome.
 */
export interface CheckpointView {
  runId: string;
  stepIndex: number;
  stepName: string;
  output: unknown;
  attempt: number;
  epoch: number;
  meta: Record<string, unknown> | null;
  createdAt: Date;
}

/** `RunRepository.patchStatus(kind, patchId)`: where a kind's open runs stand with a `ctx.patched(id)`. */
export interface PatchStatus {
  kind: string;
  patchId: string;
  /** Open runs (pending, running, waiting) that recorded the patch's marker true: they take the new path. */
  openWithPatch: number;
  /**
   * Open runs that recorded the marker false (they passed the patch point on the old code and finish the
   * old path), and those without the marker created before the first open run that has it true (all
   * open runs without it, when none has it): they may have passed the patch point on the old code. At 0,
   * replace `patched(id)` with `deprecatePatch(id)` and delete the old path.
   */
  openMayTakeOldPath: number;
  /** When the first open run recorded the marker true, or null. */
  firstMarkedAt: Date | null;
}
