import type { HistoryRange } from '../util/run-cursor';
import type { DurableDatabase } from './durable-database';
import type { SqlText } from './durable-names';
import { ENGINE_STEP_SQL } from '../util/engine-steps';

/** What of a run is read in pages. */
type History = 'events' | 'checkpoints' | 'commands';

/**
 * Keyset reads of a run's events (by id, through ai_events_run_idx), checkpoints (by step index, their
 * primary key) and commands (by step index, ai_commands_run_idx): one index range scan from the
 * position, so page 500 costs what page 1 does. The position is bound as a bound of the range
 * (coalesce, never `$2 is null or ...`), which keeps it an index condition (checked with generic
 * plans: Index Cond `run_id = $1 and id > coalesce($2, -1)`). `limit` null reads to the end.
 * $1 run id, $2 position after (or before) which to read, $3 limit
 */
const history =
  (table: History, key: string, newestFirst: boolean, columns = '*', also = ''): SqlText =>
  (t) =>
    newestFirst
      ? `select ${columns} from ${t[table]} where run_id = $1 and ${key} < coalesce($2::bigint, 9223372036854775807)${also}
        order by ${key} desc limit $3`
      : `select ${columns} from ${t[table]} where run_id = $1 and ${key} > coalesce($2::bigint, -1)${also}
        order by ${key} limit $3`;

/**
 * A checkpoint as a run detail shows it, its output and meta measured here (`octet_length(<value>::text)`,
 * the JSON text PostgreSQL prints) and sent only when at most $4 bytes: a value over it never reaches
 * the process (not read off the socket, parsed, or redacted). The sizes are taken once, in a subquery
 * that LIMIT keeps from being flattened into the outer select. `outputs` false: no output at all (the
 * inspector page's timeline shows none), only meta measured.
 * $1 run id, $2 position, $3 limit, $4 the most bytes of a value sent
 */
const measured =
  (newestFirst: boolean, outputs: boolean): SqlText =>
  (t) => {
    const sizes = outputs
      ? 'octet_length(output::text) as output_bytes, octet_length(meta::text) as meta_bytes'
      : 'null::int as output_bytes, octet_length(meta::text) as meta_bytes';
    const inner = history(
      'checkpoints',
      'step_index',
      newestFirst,
      `run_id, step_index, step_name, attempt, epoch, created_at, ${outputs ? 'output, ' : ''}meta, ${sizes}`,
    )(t);
    const output = outputs ? 'case when output_bytes <= $4 then output end' : 'null::jsonb';
    return `select run_id, step_index, step_name, attempt, epoch, created_at, output_bytes, meta_bytes,
        ${output} as output, case when meta_bytes <= $4 then meta end as meta
      from (${inner}) m order by step_index${newestFirst ? ' desc' : ''}`;
  };

/** The type of an event a checkpoint row carries (insertRecords): a step failure's or a saved step's. */
const SAVED_TYPE = `case when coalesce((meta->>'failed')::boolean, false) then 'step.failed' else 'run.checkpoint_saved' end`;

/**
 * A run's event trail (RunEvent): its event rows, and the `run.checkpoint_saved` and `step.failed` events written in its
 * checkpoint rows (a step commit writes no event row: `insertRecords`), those a rewind set aside too. A
 * worker of an earlier release writes an event row and a checkpoint without `event_id`: no event twice.
 * Each branch reads the run's range (events through ai_events_run_idx, checkpoints through their primary
 * key, sorted by id: a run's checkpoints are few beside its events' pages) and the merge keeps the order.
 */
const trail =
  (newestFirst: boolean): SqlText =>
  (t) => {
    const [cmp, bound, dir] = newestFirst ? ['<', '9223372036854775807', ' desc'] : ['>', '-1', ''];
    const from = (table: string) =>
      `select event_id as id, run_id, ${SAVED_TYPE} as event_type, epoch, event as payload, created_at
         from ${table} where run_id = $1 and event_id ${cmp} coalesce($2::bigint, ${bound})`;
    return `select id, run_id, event_type, epoch, payload, created_at from ${t.events}
   where run_id = $1 and id ${cmp} coalesce($2::bigint, ${bound})
  union all ${from(t.checkpoints)}
  union all ${from(t.rewound)}
  order by id${dir} limit $3`;
  };

/**
 * The whole event trail of every run as one relation (`id, run_id, event_type, epoch, payload,
 * created_at`), for a query over many runs (an operator's SQL, the tests' invariants): the trail's
 * three sources unfiltered. A run's pages read `trail` instead (each source by its index).
 */
export const EVENT_TRAIL: SqlText = (t) => {
  const saved = (table: string) =>
    `select event_id, run_id, ${SAVED_TYPE}, epoch, event, created_at from ${table} where event_id is not null`;
  return `(select id, run_id, event_type, epoch, payload, created_at from ${t.events}
  union all ${saved(t.checkpoints)} union all ${saved(t.rewound)})`;
};

/**
 * For each history, the statement after a position (oldest first) and before one (newest first).
 * Commands are paged by step index too (ai_commands_run_idx): replay lets one command hold an index.
 */
export const HISTORY_SQL: Record<History, { after: SqlText; before: SqlText }> = {
  events: { after: trail(false), before: trail(true) },
  checkpoints: {
    after: history('checkpoints', 'step_index', false),
    before: history('checkpoints', 'step_index', true),
  },
  commands: {
    after: history('commands', 'step_index', false),
    before: history('commands', 'step_index', true),
  },
};

/** As HISTORY_SQL.checkpoints, every output left out (null), meta measured and sent only under $4 bytes. */
export const CHECKPOINT_MARKS_SQL = { after: measured(false, false), before: measured(true, false) };

/** As HISTORY_SQL.checkpoints, output and meta measured and sent only under $4 bytes (`output_bytes`, `meta_bytes`). */
export const SHOWN_CHECKPOINTS_SQL = { after: measured(false, true), before: measured(true, true) };

/** As HISTORY_SQL.checkpoints, the user's steps only (no engine entry: ENGINE_STEP_SQL; a filter of the same range scan). */
export const USER_CHECKPOINTS_SQL = {
  after: history('checkpoints', 'step_index', false, '*', ` and not ${ENGINE_STEP_SQL}`),
  before: history('checkpoints', 'step_index', true, '*', ` and not ${ENGINE_STEP_SQL}`),
};

/** The whole history, oldest first. */
export const ALL: HistoryRange = { position: null, newestFirst: false, limit: null };

/**
 * Rows of a run's events, checkpoints or commands in `range`, in its order. `checkpointMarks` and
 * `shownCheckpoints` take `maxValueBytes` (the values over it come as null, with their sizes).
 */
export async function readHistory(
  db: DurableDatabase,
  of: History | 'checkpointMarks' | 'shownCheckpoints' | 'userCheckpoints',
  runId: string,
  range: HistoryRange,
  maxValueBytes = 0,
): Promise<Record<string, any>[]> {
  const sqls =
    of === 'checkpointMarks'
      ? CHECKPOINT_MARKS_SQL
      : of === 'shownCheckpoints'
        ? SHOWN_CHECKPOINTS_SQL
        : of === 'userCheckpoints'
          ? USER_CHECKPOINTS_SQL
          : HISTORY_SQL[of];
  const sql = sqls[range.newestFirst ? 'before' : 'after'];
  const measures = of === 'checkpointMarks' || of === 'shownCheckpoints';
  const params = [runId, range.position, range.limit];
  const { rows } = await db.query(sql, measures ? [...params, maxValueBytes] : params);
  return rows;
}
