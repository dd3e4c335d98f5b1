import { eventPayload } from '../event-payload';
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
 * `ctx.waitForSignal`, fenced, in ONE statement, so no signal can slip in between looking and parking
 * (a lost wake-up): consume the oldest unconsumed signal of this name into the wait's checkpoint and
 * keep running; else, when the wait's deadline has passed, record the timeout and keep running; else
 * park. The park is due at once, never at infinity, when the run row changed after this statement's
 * snapshot (a signal sent meanwhile touched it: `lock` reads the newest row version, `snap` the
 * snapshot's) or a cancel is requested. Values recorded before the wait are written in every case.
 * The wait's deadline (database clock) is recorded the first time it is reached.
 * $1 id, $2 worker, $3 epoch, $4 ttl ms, $5 name, $6 signal index, $7 signal step name, $8 recorded
 * values, $9 recorded deadline (null: none or first time), $10 timeout ms (first time), $11 deadline
 * index (first time, else null), $12 deadline name, $13 parked reason, $14 park event payload,
 * $15 seq of the outcome, $16 attempts delta of a park, $17 the child run a `$child:` wait is for (null:
 * none). A child's wait times out only once that child's cancel is requested (or it ended): else the
 * outcome is `cancel_first`, nothing is recorded, and the engine requests the cancel and asks again.
 * So a parent never records a timeout while its child can still end `succeeded` (the child's finish
 * checks its cancel request in its own statement). Past the deadline, a child's `cancelled` end is
 * consumed as the timeout (that cancel is the timeout's, or came too late to matter).
 */
export const WAIT_FOR_SIGNAL_SQL: SqlText = (t) => `
with snap as (
  select xmin::text as x from ${t.runs} where id = $1
), lock as (
  select id, epoch, xmin::text as x, cancel_requested_at is not null as cancel_requested,
         coalesce($9::timestamptz, now() + $10 * interval '1 millisecond') as due
    from ${t.runs}
   where ${FENCE}
   for update
), sig as (
  update ${t.signals} s set consumed_at = now()
   where s.id = (select p.id from ${t.signals} p join lock on p.run_id = lock.id
                  where p.name = $5 and p.consumed_at is null
                  order by p.id limit 1 for update of p skip locked)
  returning s.payload
), d as (
  select lock.*, case when lock.due <= now() and $17::uuid is not null
                           and (select payload->>'status' from sig) = 'cancelled' then 'timed_out'
                      when exists (select 1 from sig) then 'consumed'
                      when lock.due <= now() and $17::uuid is not null and not exists (
                        select 1 from ${t.runs} c where c.id = $17::uuid
                           and (c.cancel_requested_at is not null
                                or c.status in ('succeeded', 'failed', 'cancelled', 'dead_lettered'))
                      ) then 'cancel_first'
                      when lock.due <= now() then 'timed_out' else 'parked' end as outcome
    from lock
), run as (
  update ${t.runs} r
     set status = case when d.outcome = 'parked' then 'waiting' else 'running' end,
         worker_id = case when d.outcome = 'parked' then null else r.worker_id end,
         lease_expires_at = case when d.outcome = 'parked' then null
                                 else now() + $4 * interval '1 millisecond' end,
         available_at = case when d.outcome <> 'parked' then r.available_at
                             when d.x <> (select x from snap) or r.cancel_requested_at is not null then now()
                             else coalesce(d.due, 'infinity') end,
         attempts = case when d.outcome = 'parked' then greatest(r.attempts + $16, 0) else 0 end,
         parked_reason = case when d.outcome = 'parked' then $13 else r.parked_reason end,
         updated_at = now()
    from d
   where r.id = d.id
  returning r.id, r.epoch, r.available_at, d.outcome, d.due, r.cancel_requested_at is not null as cancel_requested
), ${releaseSlots(
  t,
  "(select id, epoch from run where outcome = 'parked')",
  // A parent waiting for its child frees its slots whatever its kind says: the child may need them.
  `${heldWhileWaiting(t)} and $5::text not like '$child:%'`,
)}, cp as (
  insert into ${t.checkpoints} (run_id, step_index, step_name, output, attempt, epoch, seq)
  select run.id, $6, $7, case when run.outcome = 'consumed' then jsonb_build_object('payload', (select payload from sig))
                              else '{"timedOut":true}'::jsonb end, 0, run.epoch, $15
    from run where run.outcome in ('consumed', 'timed_out')
), deadline as (
  insert into ${t.checkpoints} (run_id, step_index, step_name, output, attempt, epoch)
  select run.id, $11, $12, coalesce(to_jsonb(run.due), 'null'::jsonb), 0, run.epoch from run where $11::int is not null
), ${insertRecords(t, '$8', '0', 'recs')}, ev as (
  insert into ${t.events} (run_id, event_type, epoch, payload)
  select run.id,
         case run.outcome when 'consumed' then 'signal.received' when 'timed_out' then 'signal.timed_out'
                          else 'run.waiting_for_signal' end,
         run.epoch,
         case run.outcome when 'parked' then $14::jsonb || jsonb_build_object('availableAt', run.available_at)
                          else jsonb_build_object('name', $5::text, 'step', $6::int) end
    from run where run.outcome <> 'cancel_first'
)
select outcome, available_at, cancel_requested, to_jsonb(due) #>> '{}' as due, (select payload from sig) as payload from run`;

/** A wait for a signal: where it is recorded and what to do when nothing is there yet. */
export interface SignalWaitWrite {
  name: string;
  deadlineIndex: number;
  signalIndex: number;
  /** The recorded deadline (ISO), or null when there is none yet or the wait has no timeout. */
  deadline: string | null;
  /** Record the deadline now (the first time the wait is reached). */
  recordDeadline: boolean;
  timeoutMs: number | null;
  reason: string;
  attemptsDelta: number;
  seq: number;
  records: CheckpointWrite[];
  /** A wait for this child run: it times out only once the child's cancel is requested. */
  childId?: string;
}

/** What the wait statement did (`cancel_first`: a child wait's deadline passed; cancel the child first). */
export interface SignalWaitOutcome {
  outcome: 'consumed' | 'timed_out' | 'parked' | 'cancel_first';
  payload: unknown;
  availableAt: Date | null;
  cancelRequested: boolean;
  /** The wait's deadline (ISO, database clock), or null without one. */
  due: string | null;
}

/**
 * One statement: consume the oldest pending signal `name`, or record the timeout when the deadline
 * passed, or park (due at once when something arrived meanwhile). See WAIT_FOR_SIGNAL_SQL.
 */
export async function waitForSignal(
  s: StoreContext,
  f: Fence,
  w: SignalWaitWrite,
): Promise<SignalWaitOutcome> {
  const r = await runFenced<{
    outcome: SignalWaitOutcome['outcome'];
    payload: unknown;
    available_at: unknown;
    cancel_requested: boolean;
    due: string | null;
  }>(
    s,
    f,
    `wait for signal ${w.name}`,
    WAIT_FOR_SIGNAL_SQL,
    [
      s.options.worker.leaseTtlMs,
      w.name,
      w.signalIndex,
      `$signal:${w.name}`,
      recordset(w.records),
      w.deadline,
      w.deadline === null ? w.timeoutMs : null,
      w.recordDeadline ? w.deadlineIndex : null,
      `$deadline:${w.name}`,
      w.reason,
      eventPayload(s.options, 'run.waiting_for_signal', { name: w.name, timeoutMs: w.timeoutMs }),
      w.seq,
      w.attemptsDelta,
      w.childId ?? null,
    ],
    'dx_wait_signal',
  );
  return {
    outcome: r.outcome,
    payload: r.payload,
    availableAt: finiteDate(r.available_at),
    cancelRequested: r.cancel_requested,
    due: r.due === 'infinity' ? null : r.due,
  };
}
