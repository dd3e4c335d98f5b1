import type { DurableNames } from '../durable-names';
import { RECORD_FORMAT } from '../record-format';

/**
 * The hand-off in START_RUN_SQL (docs/ARCHITECTURE.md, "Hand-off"): the CTE `w`, one live worker that
 * offers a slot for this run, its row locked SKIP LOCKED (a start never waits on another start or on the
 * worker's claim: it then inserts the run pending, as without a worker). Only for a run due now ($5), with
 * no concurrency key ($9), of a kind the worker takes by hand-off (`handoff_kinds`: no limit, no debounce,
 * by its own registry) and no worker declared a limit for (`ai_limits`), pinned to a version it serves
 * ($11; unpinned: its newest), of a record format it replays; $12 the starter allows it (false: the
 * kind's declaration here has a limit). The slot with most room first.
 * @internal
 */
export const handoffWorker = (t: DurableNames): string => `w as (
  select wk.worker_id, wk.handoff_ms, wk.handoff_token,
         coalesce($11::int, (select max(v::int) from jsonb_array_elements_text(wk.versions -> $1::text) v)) as version
    from ${t.workers} wk
   where $12::boolean and wk.handoff_slots > 0 and wk.handoff_ms > 0 and wk.expires_at > now()
     and $1::text = any(wk.handoff_kinds) and wk.record_format >= ${RECORD_FORMAT}
     and ($11::int is null or wk.versions -> $1::text @> to_jsonb($11::int))
     and coalesce($5::timestamptz, now()) <= now() and $9::text is null
     and not exists (select 1 from ${t.limits} l where l.kind = $1::text)
   order by wk.handoff_slots desc
   limit 1
   for update of wk skip locked
)`;

/**
 * The columns a start inserts besides the run's own, and their values (scalar reads of `w`: one VALUES
 * row, one new run): a handed run is `running` for the worker of `w` at epoch 1, its attempt counted,
 * pinned to `w`'s version, under the worker's hand-off lease (`handoff_expires_at` remembers it);
 * without a worker, `pending` as always.
 */
export const HANDED_COLUMNS = `kind_version, status, worker_id, epoch, attempts, lease_expires_at, handoff_expires_at`;
const handed = (then: string, otherwise: string) =>
  `case when (select worker_id from w) is null then ${otherwise} else ${then} end`;
const lease = `now() + (select handoff_ms from w) * interval '1 millisecond'`;
export const HANDED_VALUES = `coalesce($11::int, (select version from w)), ${handed(`'running'`, `'pending'`)},
          (select worker_id from w), ${handed('1', '0')}, ${handed('1', '0')}, ${lease}, ${lease}`;

/**
 * The CTE `taken`: the slot the handed run took, and the run named in the worker's row (its next claim
 * reads the list: a NOTIFY it missed costs nothing). The row is locked by `w` already.
 */
export const takeSlot = (t: DurableNames, from: string): string => `taken as (
  update ${t.workers} wk
     set handoff_slots = wk.handoff_slots - 1, handoff_runs = wk.handoff_runs || ${from}.id
    from ${from}
   where wk.worker_id = ${from}.worker_id
)`;

/** The `run.claimed` event of a handed run, beside its `run.created` (events' columns, from CTE `from`). */
export const handedEvent = (from: string): string => `
  select id, 'run.claimed', 1,
         jsonb_build_object('workerId', worker_id, 'attempt', 1, 'timeline', timeline, 'handoff', true)
    from ${from} where worker_id is not null`;

/**
 * The NOTIFY payload of a start: the kind (idle workers claim), or for a handed run
 * `$handoff:<run id>:<token>:<worker id>`, which only that worker process takes.
 */
export const startNotice = (from: string): string =>
  `case when ${from}.worker_id is null then ${from}.kind
        else '$handoff:' || ${from}.id || ':' || coalesce((select w.handoff_token from w), 0) || ':' || ${from}.worker_id end`;
