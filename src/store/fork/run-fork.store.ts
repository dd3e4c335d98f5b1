import type { RunStatus, RunView } from '../../interfaces/run.interface';
import { DurableDatabase } from '../durable-database';
import { toRunView } from '../run-row.mapper';
import { FORK_PLAN_SQL, FORK_RUN_SQL } from './fork-run.sql';
import { REWIND_RUN_SQL } from './rewind-run.sql';

/** One recorded position of the original's `run()`: index, name, delivery order, a started child's id. */
export interface ForkPosition {
  index: number;
  name: string;
  seq: number | null;
  /** The child run a `$child:<kind>` start recorded. */
  child: string | null;
}

/** One command row of the original. */
export interface ForkCommandRow {
  key: string;
  index: number;
  status: string;
  name: string;
}

/** What a fork is planned from (FORK_PLAN_SQL), read in one snapshot of the original. */
export interface ForkPlanRead {
  id: string;
  kind: string;
  status: RunStatus;
  epoch: number;
  /** The row's version (`xmin`): the fork's statement requires it unchanged. */
  rowVersion: string;
  /** The version of its kind it is pinned to, or null (never claimed). */
  version: number | null;
  generation: number;
  /** A cancel was requested (a running run may be in its `onCancel` cleanup). */
  cancelRequested: boolean;
  positions: ForkPosition[];
  commands: ForkCommandRow[];
  /** Names of the end signals (`$child:<id>`) stored for it. */
  childEnds: string[];
}

/** What the fork's statement writes, as decided by the plan. */
export interface ForkWrite {
  originalId: string;
  rowVersion: string;
  fromStep: number;
  original: 'leave' | 'cancel';
  /** The fork's input (JSON), or null for the original's. */
  inputJson: string | null;
  version: number | null;
  edit: { index: number; outputJson: string } | null;
  idempotencyKey: string | null;
  createdEvent: string;
  forkedEvent: string;
  cancelReason: string;
  cancelledEvent: string;
  childEnds: string[];
  /** The fork's commands send the original's keys (`keepKeys`). */
  keepKeys: boolean;
}

/** What a rewind in place writes (REWIND_RUN_SQL), as decided by the plan. */
export interface RewindWrite {
  runId: string;
  rowVersion: string;
  fromStep: number;
  inputJson: string | null;
  version: number | null;
  edit: { index: number; outputJson: string } | null;
  event: string;
  childEnds: string[];
}

/** How a rewind's statement went: `rewound` false when the run is not failed or dead-lettered. */
export type RewindOutcome =
  { kind: 'rewound'; archived: number } | { kind: 'moved' } | { kind: 'not-found' } | { kind: 'not-ended' };

/** How the fork's statement went. */
export type ForkOutcome =
  | { kind: 'forked'; run: RunView; inherited: number }
  /** The original's row moved since the plan (a write of its own): plan again. */
  | { kind: 'moved' }
  | { kind: 'not-found' }
  /** The idempotency key is another run's. */
  | { kind: 'key-taken' };

/** The two statements of `RunRepository.fork`: its plan (a read) and the fork (one write). @internal */
export class RunForkStore {
  constructor(private readonly db: DurableDatabase) {}

  /** The original as a fork plans from it, or undefined for an unknown run. */
  async plan(id: string): Promise<ForkPlanRead | undefined> {
    const r = (await this.db.query(FORK_PLAN_SQL, [id], 'dx_fork_plan')).rows[0];
    if (!r) return undefined;
    return {
      id: r.id,
      kind: r.kind,
      status: r.status,
      epoch: Number(r.epoch),
      rowVersion: r.row_version,
      version: r.version,
      generation: r.generation,
      cancelRequested: r.cancel_requested,
      positions: (r.positions as [number, string, number | null, string | null][]).map(
        ([index, name, seq, child]) => ({ index, name, seq, child }),
      ),
      commands: (r.commands as [string, number, string, string][]).map(([key, index, status, name]) => ({
        key,
        index,
        status,
        name,
      })),
      childEnds: r.child_ends,
    };
  }

  /** The fork, in one statement (FORK_RUN_SQL). */
  async fork(w: ForkWrite): Promise<ForkOutcome> {
    const { rows } = await this.db.query(
      FORK_RUN_SQL,
      [
        w.originalId,
        w.rowVersion,
        w.fromStep,
        w.original,
        w.inputJson,
        w.version,
        w.edit?.index ?? null,
        w.edit?.outputJson ?? null,
        w.idempotencyKey,
        w.createdEvent,
        w.forkedEvent,
        w.cancelReason,
        w.cancelledEvent,
        w.childEnds,
        this.db.names.wakeChannel,
        w.keepKeys,
      ],
      'dx_fork',
    );
    const r = rows[0];
    if (!r.found) return { kind: 'not-found' };
    if (!r.locked) return { kind: 'moved' };
    if (!r.id) return { kind: 'key-taken' };
    return { kind: 'forked', run: toRunView(r), inherited: r.inherited };
  }

  /** A rewind in place, in one statement (REWIND_RUN_SQL). */
  async rewind(w: RewindWrite): Promise<RewindOutcome> {
    const { rows } = await this.db.query(
      REWIND_RUN_SQL,
      [
        w.runId,
        w.rowVersion,
        w.fromStep,
        w.inputJson,
        w.version,
        w.edit?.index ?? null,
        w.edit?.outputJson ?? null,
        w.event,
        this.db.names.wakeChannel,
        w.childEnds,
      ],
      'dx_rewind',
    );
    const r = rows[0];
    if (!r.found) return { kind: 'not-found' };
    if (!r.locked) return { kind: 'moved' };
    if (!r.rewound) return { kind: 'not-ended' };
    return { kind: 'rewound', archived: r.archived };
  }
}
