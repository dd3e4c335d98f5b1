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
 * Park the run, fenced: back to `waiting` with owner and lease cleared until `available_at` (an
 * explicit time, now() + delay, or infinity when both are null: woken by an operator or a signal).
 * Optionally upserts a command in `awaiting_approval` / `in_doubt`, and records the due time as a
 * checkpoint computed by the database clock. A park is not a failure: attempts give back the claim.
 * Nothing stranded: the park never outlives what is already stored. It is due at once (the next
 * claim replays and sees it) when the run row changed after this statement's snapshot (a signal, a
 * decision or a cancel touched it: `lock` reads the newest row version, `snap` the snapshot's), when
 * a cancel is requested, or when the command row was already decided (its upsert matched nothing).
 * Outside actions lock the run row before anything else, so they either commit before this
 * statement takes the row (and are seen) or wait for it and then find the run `waiting`. The run's
 * concurrency slots are freed, unless its kind holds them while waiting (`holdSlotWhileWaiting`).
 * $1 id, $2 worker, $3 epoch, $4 at, $5 delay ms, $6 attempts delta, $7 parked reason, $8 event type,
 * $9 event payload, $10 command key, $11 command status, $12 step index, $13 command name, $14 payload,
 * $15 record index, $16 record name, $17 recorded values, $18 record seq, $19 an `approved` command
 * may be parked in doubt (after a failover its send may be what the new primary lost)
 */
export const PARK_RUN_SQL: SqlText = (t) => `
with snap as (
  select xmin::text as x from ${t.runs} where id = $1
), lock as (
  select id, epoch, xmin::text as x from ${t.runs}
   where ${FENCE}
   for update
), cmd as (
  insert into ${t.commands} (idempotency_key, run_id, step_index, command_name, payload, status, epoch)
  select $10, lock.id, $12, $13, $14::jsonb, $11, lock.epoch from lock where $10::text is not null
  on conflict (idempotency_key) do update set status = excluded.status, epoch = excluded.epoch, updated_at = now()
   where ai_commands.status = excluded.status
      or (ai_commands.status = 'pending' and excluded.status = 'in_doubt'
          and ai_commands.resolution is distinct from 'retry')
      or (ai_commands.status = 'approved' and excluded.status = 'in_doubt' and $19::boolean)
  returning idempotency_key
), run as (
  update ${t.runs} r
     set status = 'waiting', worker_id = null, lease_expires_at = null,
         available_at = case
           when lock.x <> (select x from snap) or r.cancel_requested_at is not null
             or ($10::text is not null and not exists (select 1 from cmd)) then now()
           else coalesce($4::timestamptz, now() + $5 * interval '1 millisecond', 'infinity') end,
         attempts = greatest(attempts + $6, 0), parked_reason = $7, updated_at = now()
    from lock
   where r.id = lock.id
  returning r.id, r.epoch, r.available_at,
            coalesce($4::timestamptz, now() + $5 * interval '1 millisecond', 'infinity') as due
), ${releaseSlots(t, 'run', heldWhileWaiting(t))}, rec as (
  insert into ${t.checkpoints} (run_id, step_index, step_name, output, attempt, epoch, seq)
  select run.id, $15, $16, to_jsonb(run.due), 0, run.epoch, $18 from run where $15::int is not null
), ${insertRecords(t, '$17')}, ev as (
  insert into ${t.events} (run_id, event_type, epoch, payload)
  select run.id, $8, run.epoch, $9::jsonb || jsonb_build_object('availableAt', run.available_at) from run
)
select available_at, due from run`;

/** A park: where the run waits, and what is recorded with it. */
export interface ParkWrite {
  at?: string | null;
  delayMs?: number | null;
  attemptsDelta: number;
  reason: string;
  event: string;
  payload: Record<string, unknown>;
  command?: {
    key: string;
    status: 'awaiting_approval' | 'in_doubt';
    index: number;
    name: string;
    payloadJson: string;
    /** An `approved` row may become `in_doubt` (a manual command after a failover): one statement. */
    fromApproved?: boolean;
  };
  /** Record the due time (database clock) as checkpoint `name` at `index`, delivered as `seq`. */
  dueRecord?: { index: number; name: string; seq: number };
  records?: CheckpointWrite[];
}

/**
 * Parks the run (lease released). `availableAt` is when it becomes due: null = until woken; `now`
 * or earlier when something it waits for is already stored (nothing stranded); `due` is the due
 * time the park asked for.
 */
export async function parkRun(
  s: StoreContext,
  f: Fence,
  w: ParkWrite,
): Promise<{ availableAt: Date | null; due: Date | null }> {
  const row = await runFenced<{ available_at: unknown; due: unknown }>(
    s,
    f,
    w.event,
    PARK_RUN_SQL,
    [
      w.at ?? null,
      w.delayMs ?? null,
      w.attemptsDelta,
      w.reason,
      w.event,
      eventPayload(s.options, w.event, w.payload),
      w.command?.key ?? null,
      w.command?.status ?? null,
      w.command?.index ?? null,
      w.command?.name ?? null,
      w.command?.payloadJson ?? null,
      w.dueRecord?.index ?? null,
      w.dueRecord?.name ?? null,
      recordset(w.records ?? []),
      w.dueRecord?.seq ?? null,
      w.command?.fromApproved === true,
    ],
    'dx_park',
  );
  return { availableAt: finiteDate(row.available_at), due: finiteDate(row.due) };
}
