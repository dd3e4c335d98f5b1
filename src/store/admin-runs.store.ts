import { Injectable } from '@nestjs/common';
import type { CheckpointView, RunCursor, RunStatus } from '../interfaces/run.interface';
import type { HistoryRange, KeyedRun, RunCursorKey } from '../util/run-cursor';
import { readHistory } from './run-history';
import { isHeld, toCheckpoint } from './run-row.mapper';
import { DurableDatabase } from './durable-database';
import { CURSOR_KEY_SQL, cursorValues, keyedRuns, listWalk } from './run-keyset';
import type { DurableNames, SqlText } from './durable-names';

/** A checkpoint read with its values' sizes (JSON text as PostgreSQL prints it); a value over the cap is null. */
export interface MeasuredCheckpoint {
  checkpoint: CheckpointView;
  /** Bytes of the output's JSON text; null when there is none (or it was not asked for). */
  outputBytes: number | null;
  /** Bytes of the meta's JSON text; null when there is none. */
  metaBytes: number | null;
}

/**
 * The inspector's runs list: newest first with keyset pagination on (created_at, id), served by
 * ai_runs_list_idx, so page 1,000 costs what page 1 does. A summary only (no input/output): the list must
 * stay small whatever the runs carry. Command counts come from the partial index on unsettled commands.
 * $1 statuses, $2 kind, $3 created from, $4 created before, $5 dead-lettered, $6 has an in-doubt
 * command, $7/$8 cursor (created_at, id), $9 limit, $10 tags it must all have (ADMIN_LIST_RUNS_BY_TAG_SQL
 * only: through ai_run_tags, `listWalk`)
 */
const adminListRuns = (t: DurableNames, tags: string | null): string => {
  const w = listWalk(t, tags, ['$7', '$8']);
  return `
select r.id, r.kind, r.status, r.cursor, r.epoch, r.worker_id, r.attempts, r.max_attempts, r.parked_reason,
       r.error ->> 'message' as error_message, r.error ->> 'code' as error_code, r.available_at, r.created_at,
       r.updated_at, r.finished_at,
       ${CURSOR_KEY_SQL} as created_key,
       (select count(*) from ${t.commands} c where c.run_id = r.id and c.status = 'in_doubt')::int as in_doubt,
       (select count(*) from ${t.commands} c
         where c.run_id = r.id and c.status = 'awaiting_approval')::int as awaiting_approval
  from ${w.from}
 where ($1::text[] is null or r.status = any($1))
   and ($2::text is null or r.kind = $2)
   and ($3::timestamptz is null or r.created_at >= $3)
   and ($4::timestamptz is null or r.created_at < $4)
   and ($5::boolean is null or (r.status = 'dead_lettered') = $5)
   and ($6::boolean is null
        or exists (select 1 from ${t.commands} c where c.run_id = r.id and c.status = 'in_doubt') = $6)
   and ${w.where}
 order by ${w.order}
 limit $9`;
};
export const ADMIN_LIST_RUNS_SQL: SqlText = (t) => adminListRuns(t, null);
export const ADMIN_LIST_RUNS_BY_TAG_SQL: SqlText = (t) => adminListRuns(t, '$10');

/**
 * Where a run stands, for "has it changed?": the row version (xmin: every update of the row makes a new
 * one, including a cursor move that writes no event) and the newest event id of its trail (one backward
 * step on ai_events_run_idx, an index-only scan; the newest of its checkpoints' events, which a step
 * commit writes in the checkpoint row: EVENT_TRAIL). No run data, no event bodies. $1 run id
 */
export const RUN_VERSION_SQL: SqlText = (t) => `
select r.status, r.xmin::text as row_version,
       greatest((select e.id from ${t.events} e where e.run_id = r.id order by e.id desc limit 1),
                (select max(c.event_id) from ${t.checkpoints} c where c.run_id = r.id)) as last_event
  from ${t.runs} r
 where r.id = $1`;

/** What RUN_VERSION_SQL reads. */
export interface RunVersion {
  status: RunStatus;
  rowVersion: string;
  /** The newest event's id; null for a run without events. */
  lastEventId: number | null;
}

/** A run in the admin list: no input or output, so a page stays small whatever runs carry. */
export interface AdminRunSummary {
  id: string;
  kind: string;
  status: RunStatus;
  cursor: RunCursor;
  epoch: number;
  workerId: string | null;
  attempts: number;
  maxAttempts: number;
  parkedReason: string | null;
  /** Held on non-determinism (as `RunView.held`). */
  held: boolean;
  errorMessage: string | null;
  inDoubtCommands: number;
  awaitingApproval: number;
  availableAt: Date;
  createdAt: Date;
  updatedAt: Date;
  finishedAt: Date | null;
}

/** The filters of the admin list (null: any). */
export interface AdminRunFilter {
  statuses: RunStatus[] | null;
  kind: string | null;
  createdFrom: Date | null;
  createdTo: Date | null;
  deadLettered: boolean | null;
  inDoubt: boolean | null;
  /** Tags as JSON text, or null. */
  tags: string | null;
}

/**
 * The inspector's runs list (ADMIN_LIST_RUNS_SQL) and a run's version for its live view (RUN_VERSION_SQL), as
 * stored: the admin redacts what it shows. @internal
 */
@Injectable()
export class AdminRunsStore {
  constructor(private readonly db: DurableDatabase) {}

  /** Up to `take` run summaries before `after` (newest first), each with its cursor key. */
  async list(
    f: AdminRunFilter,
    after: RunCursorKey | null,
    take: number,
  ): Promise<KeyedRun<AdminRunSummary>[]> {
    const params = [
      f.statuses,
      f.kind,
      f.createdFrom,
      f.createdTo,
      f.deadLettered,
      f.inDoubt,
      ...cursorValues(after),
      take,
    ];
    const { rows } = f.tags
      ? await this.db.query(ADMIN_LIST_RUNS_BY_TAG_SQL, [...params, f.tags])
      : await this.db.query(ADMIN_LIST_RUNS_SQL, params);
    return keyedRuns(rows, toSummary);
  }

  /**
   * The run's checkpoints in `range`, each output and meta measured in SQL and read only when at most
   * `maxBytes` (else null, its size in `outputBytes`/`metaBytes`). `outputs` false: no output at all
   * (what the inspector page's timeline needs).
   */
  async shownCheckpoints(
    id: string,
    range: HistoryRange,
    maxBytes: number,
    outputs = true,
  ): Promise<MeasuredCheckpoint[]> {
    const rows = await readHistory(
      this.db,
      outputs ? 'shownCheckpoints' : 'checkpointMarks',
      id,
      range,
      maxBytes,
    );
    return rows.map((r) => ({
      checkpoint: toCheckpoint(r),
      outputBytes: r.output_bytes,
      metaBytes: r.meta_bytes,
    }));
  }

  /** The run's row version and newest event id (RUN_VERSION_SQL); undefined for an unknown run. */
  async version(id: string): Promise<RunVersion | undefined> {
    const { rows } = await this.db.query(RUN_VERSION_SQL, [id], 'dx_run_version');
    const r = rows[0];
    return (
      r && {
        status: r.status,
        rowVersion: r.row_version,
        lastEventId: r.last_event ? Number(r.last_event) : null,
      }
    );
  }
}

function toSummary(r: Record<string, any>): AdminRunSummary {
  return {
    id: r.id,
    kind: r.kind,
    status: r.status,
    cursor: r.cursor,
    epoch: Number(r.epoch),
    workerId: r.worker_id,
    attempts: r.attempts,
    maxAttempts: r.max_attempts,
    parkedReason: r.parked_reason,
    held: isHeld(r.status, { code: r.error_code }),
    errorMessage: r.error_message,
    inDoubtCommands: r.in_doubt,
    awaitingApproval: r.awaiting_approval,
    availableAt: r.available_at,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    finishedAt: r.finished_at,
  };
}
