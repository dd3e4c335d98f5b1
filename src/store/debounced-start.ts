import type { RunView } from '../interfaces/run.interface';
import type { DurableDatabase } from './durable-database';
import type { SqlText } from './durable-names';
import { RECORD_FORMAT } from './record-format';
import { runViewColumns, toRunView } from './run-row.mapper';

/**
 * A start of a debounced kind, in one statement: inserts the run due `periodMs` from now, or, when a run
 * of the kind with the same debounce key has not begun yet (pending, epoch 0: ai_runs_debounce_idx),
 * replaces its input with this one and moves it `periodMs` from now (`run.debounced`). A claim that
 * holds the row first makes the start wait, then insert a new run (the old one has begun); a start that
 * holds it first makes the claim skip it, and then find it no longer due. The result names its columns
 * (RUN_VIEW_COLUMNS), never `*`: a named statement's result must not change with the table's.
 * $1 kind, $2 input, $3 max attempts, $4 priority, $5 created event payload, $6 concurrency key,
 * $7 debounce key, $8 period ms, $9 tags, $10 kind version
 */
export const DEBOUNCED_START_SQL: SqlText = (t) => `
with ins as (
  insert into ${t.runs} as r (kind, input, max_attempts, available_at, priority, concurrency_key, debounce_key, tags,
                              kind_version, record_format)
  values ($1, $2::jsonb, $3, now() + $8 * interval '1 millisecond', $4, $6, $7, $9::jsonb, $10, ${RECORD_FORMAT})
  on conflict (kind, debounce_key) where debounce_key is not null and status = 'pending' and epoch = 0
  do update set input = excluded.input, available_at = excluded.available_at, priority = excluded.priority,
                concurrency_key = excluded.concurrency_key, tags = excluded.tags,
                kind_version = excluded.kind_version, record_format = excluded.record_format, updated_at = now()
  returning r.*, (r.xmax = 0) as inserted
), ev as (
  insert into ${t.events} (run_id, event_type, epoch, payload)
  select id, case when inserted then 'run.created' else 'run.debounced' end, 0,
         case when inserted then $5::jsonb else jsonb_build_object('availableAt', available_at) end
    from ins
)
select ${runViewColumns('ins')}, ins.inserted from ins`;

/** What a debounced start writes (the fields of RunControlStore's NewRun it uses). */
export interface DebouncedRun {
  kind: string;
  inputJson: string;
  maxAttempts: number;
  priority: number;
  /** The `run.created` event's payload, for a new run. */
  event: string;
  concurrencyKey: string | null;
  /** Tags as JSON text, or null. */
  tags: string | null;
  /** The version it is pinned to; null: its first claim pins it. */
  kindVersion: number | null;
}

/** Starts a run of a debounced kind (DEBOUNCED_START_SQL): the run, and whether this call created it. */
export async function startDebounced(
  db: DurableDatabase,
  run: DebouncedRun,
  debounce: { key: string; periodMs: number },
): Promise<{ run: RunView; created: boolean }> {
  const { rows } = await db.query(
    DEBOUNCED_START_SQL,
    [
      run.kind,
      run.inputJson,
      run.maxAttempts,
      run.priority,
      run.event,
      run.concurrencyKey,
      debounce.key,
      debounce.periodMs,
      run.tags,
      run.kindVersion,
    ],
    'dx_start_debounced',
  );
  return { run: toRunView(rows[0]), created: rows[0].inserted };
}
