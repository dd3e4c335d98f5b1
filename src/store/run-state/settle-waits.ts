import { eventPayload } from '../event-payload';
import type { DurableEventType } from '../../interfaces/events.interface';
import {
  CheckpointWrite,
  FENCE,
  Fence,
  finiteDate,
  insertRecords,
  recordset,
  runFenced,
  StoreContext,
} from './fence';
import type { SqlText } from '../durable-names';
import { heldWhileWaiting, releaseSlots } from './slots';

/**
 * The pending waits of a run (sleeps, signal waits, child waits), settled in ONE fenced statement:
 * the wait whose outcome happened first is recorded (a signal by when it was stored, a timer by its due
 * time, ties in call order), its signal consumed; else, when the run is blocked (`$5`), it parks until
 * the earliest due time, or at once when its row changed after this statement's snapshot (a signal
 * sent meanwhile) or a cancel is requested. Once a cancel is requested nothing is recorded (a busy run
 * stops on `cancel_requested`, a blocked one parks due at once). Several waits on one name are served in
 * call order. A child's wait (`$child:<id>`) times out only once that child's cancel is requested or it
 * ended: else the outcome is `cancel_first` (nothing recorded; the engine requests the cancel and asks
 * again), so a parent never records a timeout while its child can still end `succeeded`; past the
 * deadline a child's `cancelled` end is taken as the timeout. Values recorded before are written in
 * every case.
 * $1 id, $2 worker, $3 epoch, $4 ttl ms, $5 park when nothing is ready, $6 wait delivery indexes,
 * $7 record names, $8 signal names (null: a sleep), $9 due times (null: none), $10 recorded values,
 * $11 seq of the outcome, $12 park reason, $13 park event, $14 park event payload, $15 attempts delta
 */
export const SETTLE_WAITS_SQL: SqlText = (t) => `
with snap as (
  select xmin::text as x from ${t.runs} where id = $1
), lock as (
  select id, epoch, xmin::text as x, cancel_requested_at from ${t.runs} where ${FENCE} for update
), w as (
  select * from unnest($6::int[], $7::text[], $8::text[], $9::timestamptz[])
           with ordinality as w(idx, rec, name, due, ord)
), firsts as (
  -- The first pending wait of each name takes that name's oldest stored signal.
  select distinct on (w.name) w.* from w where w.name is not null order by w.name, w.ord
), cand as (
  select f.idx, f.ord, f.rec, f.name, s.id as signal_id, s.created_at as at,
         case when f.due <= now() and f.name like '$child:%' and s.payload->>'status' = 'cancelled'
              then 'timed_out' else 'consumed' end as outcome
    from firsts f
    join lateral (select p.id, p.created_at, p.payload from ${t.signals} p
                   where p.run_id = $1 and p.name = f.name and p.consumed_at is null
                   order by p.id limit 1) s on true
  union all
  select w.idx, w.ord, w.rec, w.name, null, w.due,
         case when w.name like '$child:%' and not exists (
                select 1 from ${t.runs} c where c.id = substr(w.name, 8)::uuid
                   and (c.cancel_requested_at is not null
                        or c.status in ('succeeded', 'failed', 'cancelled', 'dead_lettered')))
              then 'cancel_first' when w.name is null then 'fired' else 'timed_out' end
    from w where w.due <= now()
), pick as (
  -- Nothing is settled once a cancel is requested: the engine rejects the waits (RunCancelledError).
  select cand.* from cand, lock where lock.cancel_requested_at is null order by cand.at, cand.ord limit 1
), sig as (
  update ${t.signals} s set consumed_at = now()
    from pick where s.id = pick.signal_id and pick.outcome in ('consumed', 'timed_out')
  returning s.payload
), d as (
  select lock.*, coalesce((select outcome from pick), case when $5 then 'parked' else 'none' end) as outcome
    from lock
), run as (
  update ${t.runs} r
     set status = case when d.outcome = 'parked' then 'waiting' else 'running' end,
         worker_id = case when d.outcome = 'parked' then null else r.worker_id end,
         lease_expires_at = case when d.outcome = 'parked' then null
                                 else now() + $4 * interval '1 millisecond' end,
         available_at = case when d.outcome <> 'parked' then r.available_at
                             when d.x <> (select x from snap) or r.cancel_requested_at is not null then now()
                             else coalesce((select min(due) from w), 'infinity') end,
         attempts = case when d.outcome = 'parked' then greatest(r.attempts + $15, 0)
                         when d.outcome in ('consumed', 'timed_out', 'fired') then 0 else r.attempts end,
         parked_reason = case when d.outcome = 'parked' then $12 else r.parked_reason end,
         updated_at = now()
    from d
   where r.id = d.id
  returning r.id, r.epoch, r.available_at, d.outcome, r.cancel_requested_at is not null as cancel_requested
), ${releaseSlots(
  t,
  "(select id, epoch from run where outcome = 'parked')",
  // A parent waiting for its child frees its slots whatever its kind says: the child may need them.
  `${heldWhileWaiting(t)} and not exists (select 1 from w where w.name like '$child:%')`,
)}, cp as (
  insert into ${t.checkpoints} (run_id, step_index, step_name, output, attempt, epoch, seq)
  select run.id, pick.idx, pick.rec,
         case run.outcome when 'consumed' then jsonb_build_object('payload', (select payload from sig))
                          when 'fired' then to_jsonb(pick.at) else '{"timedOut":true}'::jsonb end,
         0, run.epoch, $11
    from run, pick where run.outcome in ('consumed', 'timed_out', 'fired')
), ${insertRecords(t, '$10', '0', 'recs')}, ev as (
  insert into ${t.events} (run_id, event_type, epoch, payload)
  select run.id,
         case run.outcome when 'consumed' then 'signal.received' when 'timed_out' then 'signal.timed_out'
                          else $13 end,
         run.epoch,
         case run.outcome when 'parked' then $14::jsonb || jsonb_build_object('availableAt', run.available_at)
                          else jsonb_build_object('name', (select name from pick), 'step', (select idx from pick)) end
    from run where run.outcome in ('consumed', 'timed_out', 'parked')
)
select run.outcome, run.available_at, run.cancel_requested, (select idx from pick) as idx,
       (select name from pick) as name, (select payload from sig) as payload
  from run`;

/** One pending wait, as the statement settles it. */
export interface PendingWaitRow {
  /** Where its outcome is recorded (a delivery). */
  index: number;
  /** The outcome's checkpoint name (`$sleep`, `$signal:<name>`). */
  record: string;
  /** The signal it takes (`$child:<id>` for a child's end), or null for a sleep. */
  signal: string | null;
  /** Its due time (ISO, database clock), or null without one. */
  due: string | null;
}

/** A settle of the pending waits: park when nothing is ready (`park`), with what a park records. */
export interface SettleWrite {
  waits: PendingWaitRow[];
  park: boolean;
  seq: number;
  records: CheckpointWrite[];
  reason: string;
  event: DurableEventType;
  payload: Record<string, unknown>;
  attemptsDelta: number;
}

/** What the settle did: the wait it resolved (at `index`), a park, or nothing ready. */
export interface SettleOutcome {
  outcome: 'consumed' | 'timed_out' | 'fired' | 'cancel_first' | 'parked' | 'none';
  index: number | null;
  /** The signal of a `cancel_first` (`$child:<id>`). */
  name: string | null;
  payload: unknown;
  availableAt: Date | null;
  cancelRequested: boolean;
}

/** One statement: records the first ready outcome of the pending waits, or parks. See SETTLE_WAITS_SQL. */
export async function settleWaits(s: StoreContext, f: Fence, w: SettleWrite): Promise<SettleOutcome> {
  const r = await runFenced<{
    outcome: SettleOutcome['outcome'];
    idx: number | null;
    name: string | null;
    payload: unknown;
    available_at: unknown;
    cancel_requested: boolean;
  }>(
    s,
    f,
    'settle of waits',
    SETTLE_WAITS_SQL,
    [
      s.options.worker.leaseTtlMs,
      w.park,
      w.waits.map((x) => x.index),
      w.waits.map((x) => x.record),
      w.waits.map((x) => x.signal),
      w.waits.map((x) => x.due),
      recordset(w.records),
      w.seq,
      w.reason,
      w.event,
      eventPayload(s.options, w.event, w.payload),
      w.attemptsDelta,
    ],
    'dx_settle_waits',
  );
  return {
    outcome: r.outcome,
    index: r.idx,
    name: r.name,
    payload: r.payload,
    availableAt: finiteDate(r.available_at),
    cancelRequested: r.cancel_requested,
  };
}
