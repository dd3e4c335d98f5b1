import { Injectable } from '@nestjs/common';
import type {
  CheckpointView,
  KindVersionView,
  RunEvent,
  RunStatus,
  RunView,
} from '../interfaces/run.interface';
import { KIND_VERSIONS_SQL } from './sql/kind-versions.sql';
import type { HistoryRange, KeyedRun, RunCursorKey } from '../util/run-cursor';
import { DurableDatabase } from './durable-database';
import { ALL, readHistory } from './run-history';
import { CURSOR_KEY_SQL, cursorValues, keyedRuns, listWalk } from './run-keyset';
import { runViewColumns, toCheckpoint, toEvent, toRunView } from './run-row.mapper';
import type { DurableNames, SqlText } from './durable-names';

/** One run by id (its columns named, never `*`: see RUN_VIEW_COLUMNS). $1 run id */
export const GET_RUN_SQL: SqlText = (t) => `select ${runViewColumns()} from ${t.runs} where id = $1`;

/**
 * The run API's list: newest first, keyset pagination on (created_at, id) through ai_runs_list_idx, or
 * with tags through ai_run_tags (`listWalk`). $1 statuses (null: any), $2 kind (null: any), $3/$4 cursor
 * (created_at, id), $5 limit, $6 parent run (null: any; through ai_runs_parent_idx), $7 tags the run must
 * all have (LIST_RUNS_BY_TAG_SQL only)
 */
const listRuns = (t: DurableNames, tags: string | null): string => {
  const w = listWalk(t, tags, ['$3', '$4']);
  return `select ${runViewColumns('r')}, ${CURSOR_KEY_SQL} as created_key
         from ${w.from}
        where ($1::text[] is null or r.status = any($1))
          and ($2::text is null or r.kind = $2)
          and ($6::uuid is null or r.parent_id = $6)
          and ${w.where}
        order by ${w.order}
        limit $5`;
};
export const LIST_RUNS_SQL: SqlText = (t) => listRuns(t, null);
export const LIST_RUNS_BY_TAG_SQL: SqlText = (t) => listRuns(t, '$7');

/**
 * Marks a live run to be announced on `durable_execution_done` when it ends (once: the flag is only set
 * while unset, so a waiter polling it costs no write). The mark locks the row for a moment, and a claim
 * in that moment skips it (SKIP LOCKED) after the start's wake-up was already spent: a run that is due
 * wakes the workers again when the mark commits, or it would wait for the next poll. $1 run id
 */
export const AWAIT_RUN_SQL: SqlText = (t) => `
with upd as (
  update ${t.runs} set notify_on_finish = true
   where id = $1 and not notify_on_finish and status in ('pending', 'running', 'waiting')
  returning kind, status, available_at
)
select count(pg_notify('${t.wakeChannel}', kind)) as woke
  from upd where status in ('pending', 'waiting') and available_at <= now()`;

/** What a waiter reads after AWAIT_RUN_SQL, in a snapshot of its own. $1 run id */
export const RUN_OUTCOME_SQL: SqlText = (t) =>
  `select status, kind, output, error from ${t.runs} where id = $1`;

/** A run's checkpoints of one step name (its primary key's range, filtered). $1 run id, $2 step name */
export const CHECKPOINTS_NAMED_SQL: SqlText = (t) =>
  `select * from ${t.checkpoints} where run_id = $1 and step_name = $2 order by step_index`;

/** The trace context a run was started under: its first event (run.created), through (run_id, id). $1 run id */
export const TRACEPARENT_SQL: SqlText = (t) =>
  `select payload->>'traceparent' as traceparent from ${t.events}
    where run_id = $1 and event_type = 'run.created' order by id limit 1`;

/**
 * Of a kind's open runs (pending, running, waiting): how many recorded patch `$3` (marker at `$2`) true,
 * and how many may still take the old path: those that recorded it false (they passed the patch point on
 * the old code), and those without it created before the first true marker (null: none has it).
 * $1 kind, $2 marker position, $3 marker name
 */
export const PATCH_STATUS_SQL: SqlText = (t) => `
with open as (
  select r.created_at, m.output = 'true'::jsonb as new_path,
         case when m.output = 'true'::jsonb then m.created_at end as marked_at
    from ${t.runs} r
    left join ${t.checkpoints} m on m.run_id = r.id and m.step_index = $2 and m.step_name = $3
   where r.kind = $1 and r.status in ('pending', 'running', 'waiting')
), first as (
  select min(marked_at) as at from open
)
select (select count(*) from open where new_path)::int as with_patch,
       (select count(*) from open, first
         where not new_path or new_path is null and (first.at is null or created_at < first.at))::int as old,
       (select at from first) as first_marked_at`;

/** Where a run stands for someone waiting on its result. */
export interface RunOutcome {
  status: RunStatus;
  kind: string;
  output: unknown;
  error: { message?: string } | null;
}

/** The filters of the run API's list (null: any). */
export interface RunListFilter {
  statuses: RunStatus[] | null;
  kind: string | null;
  parentId: string | null;
  /** Tags as JSON text, or null. */
  tags: string | null;
}

/** Reads of runs and their trail for the run API, one statement each. @internal */
@Injectable()
export class RunReadStore {
  constructor(private readonly db: DurableDatabase) {}

  /** PATCH_STATUS_SQL. */
  async patchStatus(kind: string, index: number, name: string) {
    const { rows } = await this.db.query<{ with_patch: number; old: number; first_marked_at: Date | null }>(
      PATCH_STATUS_SQL,
      [kind, index, name],
    );
    return rows[0];
  }

  /** The run with this id, or null. */
  /** KIND_VERSIONS_SQL: unfinished runs and live workers by (kind, version). */
  async versions(kind: string | null): Promise<KindVersionView[]> {
    return (await this.db.query<KindVersionView>(KIND_VERSIONS_SQL, [kind])).rows;
  }

  async get(id: string): Promise<RunView | null> {
    const { rows } = await this.db.query(GET_RUN_SQL, [id], 'dx_get_run');
    return rows.length ? toRunView(rows[0]) : null;
  }

  /** Up to `take` runs before `after` (newest first), each with its cursor key. */
  async list(filter: RunListFilter, after: RunCursorKey | null, take: number): Promise<KeyedRun<RunView>[]> {
    const params = [filter.statuses, filter.kind, ...cursorValues(after), take, filter.parentId];
    const { rows } = filter.tags
      ? await this.db.query(LIST_RUNS_BY_TAG_SQL, [...params, filter.tags])
      : await this.db.query(LIST_RUNS_SQL, params);
    return keyedRuns(rows, toRunView);
  }

  /** The run's events in `range` (run-history.ts); all of them, oldest first, by default. */
  async events(id: string, range: HistoryRange = ALL): Promise<RunEvent[]> {
    return (await readHistory(this.db, 'events', id, range)).map(toEvent);
  }

  /**
   * The run's checkpoints in `range` (run-history.ts); all of them, in position order, by default.
   * `userOnly`: no engine entry (`$…`, `command:…`).
   */
  async checkpoints(id: string, range: HistoryRange = ALL, userOnly = false): Promise<CheckpointView[]> {
    return (await readHistory(this.db, userOnly ? 'userCheckpoints' : 'checkpoints', id, range)).map(
      toCheckpoint,
    );
  }

  /** The `traceparent` the run was started under (its `run.created` event), or null. */
  async traceparentOf(id: string): Promise<string | null> {
    const { rows } = await this.db.query(TRACEPARENT_SQL, [id], 'dx_traceparent');
    return rows[0]?.traceparent ?? null;
  }

  /** The run's checkpoints of one step name, in position order. */
  async checkpointsNamed(id: string, name: string): Promise<CheckpointView[]> {
    const { rows } = await this.db.query(CHECKPOINTS_NAMED_SQL, [id, name]);
    return rows.map(toCheckpoint);
  }

  /** Marks the run to be announced when it ends (once), then reads it in a fresh snapshot; undefined for an unknown run. */
  async awaitOutcome(id: string): Promise<RunOutcome | undefined> {
    await this.db.query(AWAIT_RUN_SQL, [id], 'dx_await_run');
    const { rows } = await this.db.query<RunOutcome>(RUN_OUTCOME_SQL, [id], 'dx_run_outcome');
    return rows[0];
  }
}
