import type { HistoryRange } from '../util/run-cursor';
import type { DurableDatabase } from './durable-database';
import type { SqlText } from './durable-names';

/**
 * Keyset reads of a run's events (by id, through ai_events_run_idx) and checkpoints (by step index,
 * their primary key): one index range scan from the position, so page 500 costs what page 1 does. The
 * position is bound as a bound of the range (coalesce, never `$2 is null or ...`), which keeps it an
 * index condition (checked with generic plans: Index Cond `run_id = $1 and id > coalesce($2, -1)`).
 * `limit` null reads to the end.
 * $1 run id, $2 position after (or before) which to read, $3 limit
 */
const history =
  (table: 'events' | 'checkpoints', key: string, newestFirst: boolean): SqlText =>
  (t) =>
    newestFirst
      ? `select * from ${t[table]} where run_id = $1 and ${key} < coalesce($2::bigint, 9223372036854775807)
        order by ${key} desc limit $3`
      : `select * from ${t[table]} where run_id = $1 and ${key} > coalesce($2::bigint, -1)
        order by ${key} limit $3`;

/** A run's events after a position, oldest first. */
export const EVENTS_AFTER_SQL = history('events', 'id', false);
/** A run's events before a position, newest first. */
export const EVENTS_BEFORE_SQL = history('events', 'id', true);
/** A run's checkpoints after a step index, in step order. */
export const CHECKPOINTS_AFTER_SQL = history('checkpoints', 'step_index', false);
/** A run's checkpoints before a step index, newest first. */
export const CHECKPOINTS_BEFORE_SQL = history('checkpoints', 'step_index', true);

/** The whole history, oldest first. */
export const ALL: HistoryRange = { position: null, newestFirst: false, limit: null };

/** Rows of a run's events or checkpoints in `range`, in its order. */
export async function readHistory(
  db: DurableDatabase,
  of: 'events' | 'checkpoints',
  runId: string,
  range: HistoryRange,
): Promise<Record<string, any>[]> {
  const { newestFirst } = range;
  const sql =
    of === 'events'
      ? newestFirst
        ? EVENTS_BEFORE_SQL
        : EVENTS_AFTER_SQL
      : newestFirst
        ? CHECKPOINTS_BEFORE_SQL
        : CHECKPOINTS_AFTER_SQL;
  const { rows } = await db.query(sql, [runId, range.position, range.limit]);
  return rows;
}
