import type { RunCursor } from './run.interface';

/** The format tag of an exported history document. */
export const HISTORY_FORMAT = 'nestjs-durable-execution/history@1';

/** A checkpoint or recorded value of an exported history, at its step index. */
export interface HistoryCheckpoint {
  /** Its step index (steps, commands, values and waits share one sequence). */
  index: number;
  /** Step name, `command:<name>`, or a recorded value (`$uuid`, `$sleep`, `$signal:<name>`, …). */
  name: string;
  /** The stored value (a failed step's: its stored error). */
  output: unknown;
  /** Delivery order of a result (null for values). */
  seq: number | null;
  /** Hash of the call's name and arguments (null when not recorded). */
  fingerprint: string | null;
  /** The step failed and the workflow went on past it: `output` is rethrown on replay. */
  failed?: boolean;
  /**
   * The epoch of the claim that wrote it (absent in histories exported before it was: then a patch
   * marker answers as it did before issue 35, see `ctx.patched`).
   */
  epoch?: number;
}

/** A command row of an exported history. */
export interface HistoryCommand {
  /** Its idempotency key. */
  key: string;
  /** The step index it was reserved at. */
  index: number;
  /** The command's name. */
  name: string;
  /** `pending`, `in_doubt`, `succeeded`, `failed`, `awaiting_approval`, `approved` or `rejected`. */
  status: string;
  /** Its stored result, once succeeded. */
  result: unknown;
  /** Its stored error, when failed (or the error a call that ended in doubt threw). */
  error: { message?: string } | null;
  /** How it was settled: `lookup`, an operator's, or null. */
  resolution: string | null;
  /** The arguments it was reserved with. */
  payload?: unknown;
}

/**
 * A run's stored record as one JSON document: what the replay check replays. Made by
 * `exportRunHistory` (or the CLI's `export`) and replayed by `replayRuns({ histories })` (or the CLI's
 * `replay --history`).
 */
export interface RunHistory {
  /** Always HISTORY_FORMAT. */
  format: typeof HISTORY_FORMAT;
  /** The database clock when it was read: sleeps due by then count as due. */
  exportedAt: string;
  /** The run row. */
  run: {
    id: string;
    kind: string;
    /** The version of its kind it is pinned to (absent: not pinned yet, or exported before versions: 1). */
    version?: number;
    status: string;
    input: unknown;
    output: unknown;
    error: unknown;
    cursor: RunCursor;
    epoch: number;
    /** The WAL timeline of its last claim (with `epoch`, that claim's token; absent in older exports: 1). */
    timeline?: number;
    /** How many times it continued as new (absent in histories exported before: 0). */
    generation?: number;
    maxAttempts: number;
  };
  /** Its checkpoints and recorded values. */
  checkpoints: HistoryCheckpoint[];
  /** Its command rows. */
  commands: HistoryCommand[];
}
