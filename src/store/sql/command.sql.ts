/**
 * Reserve a command before dispatch, fenced, in one statement: the run's cursor says `started`, the
 * command row exists (new) or is taken back from pending / in_doubt / approved for a re-dispatch under
 * this epoch, and `tool.command_reserved` is in the trail. Returns the cancel flag so a cancelled run
 * never dispatches (and then reserves nothing, so no command is left in doubt that was never sent),
 * and `reserved` = 0 when the row was already settled (an operator decided it meanwhile): the caller
 * must not dispatch then. $1 id, $2 worker, $3 epoch, $4 cursor, $5 ttl ms, $6 key, $7 step index, $8 name,
 * $9 payload, $10 event payload, $11 recorded values
 */
export const RESERVE_COMMAND_SQL = `
with run as (
  update ai_runs
     set cursor = $4::jsonb, lease_expires_at = now() + $5 * interval '1 millisecond', updated_at = now()
   where id = $1 and worker_id = $2 and epoch = $3 and status = 'running'
  returning id, epoch, cancel_requested_at is not null as cancel_requested
), cmd as (
  insert into ai_commands (idempotency_key, run_id, step_index, command_name, payload, status, epoch)
  select $6, run.id, $7, $8, $9::jsonb, 'pending', run.epoch from run where not run.cancel_requested
  on conflict (idempotency_key) do update
     set status = 'pending', epoch = excluded.epoch, resolution = null, updated_at = now()
   where ai_commands.status in ('pending', 'in_doubt', 'approved') and ai_commands.run_id = excluded.run_id
  returning idempotency_key
), cp as (
  insert into ai_checkpoints (run_id, step_index, step_name, output, attempt, epoch, meta, seq, fingerprint)
  select run.id, c.step_index, c.step_name, coalesce(c.output, 'null'::jsonb), 0, run.epoch, c.meta, c.seq, c.fingerprint
    from run, jsonb_to_recordset($11::jsonb) as c(step_index int, step_name text, output jsonb, meta jsonb, seq int, fingerprint text)
  on conflict (run_id, step_index) do nothing
), ev as (
  insert into ai_events (run_id, event_type, epoch, payload)
  select run.id, 'tool.command_reserved', run.epoch, $10::jsonb from run
)
select run.cancel_requested, (select count(*) from cmd)::int as reserved from run`;

/**
 * Record a command's outcome with its checkpoint, fenced, in one statement: command row settled,
 * checkpoint (index → {status, result|error}), cursor `done`, attempts reset, one event.
 * $1 id, $2 worker, $3 epoch, $4 cursor, $5 ttl ms, $6 key, $7 status, $8 result, $9 error,
 * $10 checkpoint output, $11 step index, $12 step name, $13 event type, $14 event payload, $15 resolution,
 * $16 delivery order (seq), $17 call fingerprint
 */
export const RECORD_COMMAND_SQL = `
with run as (
  update ai_runs
     set cursor = $4::jsonb, attempts = 0, lease_expires_at = now() + $5 * interval '1 millisecond', updated_at = now()
   where id = $1 and worker_id = $2 and epoch = $3 and status = 'running'
  returning id, epoch, cancel_requested_at is not null as cancel_requested
), cmd as (
  update ai_commands c
     set status = $7, result = $8::jsonb, error = $9::jsonb, resolution = coalesce($15, c.resolution), updated_at = now()
    from run
   where c.idempotency_key = $6 and c.run_id = run.id
), cp as (
  insert into ai_checkpoints (run_id, step_index, step_name, output, attempt, epoch, seq, fingerprint)
  select run.id, $11, $12, $10::jsonb, 0, run.epoch, $16, $17 from run
), ev as (
  insert into ai_events (run_id, event_type, epoch, payload)
  select run.id, $13, run.epoch, $14::jsonb from run
)
select cancel_requested from run`;

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
 * statement takes the row (and are seen) or wait for it and then find the run `waiting`.
 * $1 id, $2 worker, $3 epoch, $4 at, $5 delay ms, $6 attempts delta, $7 parked reason, $8 event type,
 * $9 event payload, $10 command key, $11 command status, $12 step index, $13 command name, $14 payload,
 * $15 record index, $16 record name, $17 recorded values, $18 record seq
 */
export const PARK_RUN_SQL = `
with snap as (
  select xmin::text as x from ai_runs where id = $1
), lock as (
  select id, epoch, xmin::text as x from ai_runs
   where id = $1 and worker_id = $2 and epoch = $3 and status = 'running'
   for update
), cmd as (
  insert into ai_commands (idempotency_key, run_id, step_index, command_name, payload, status, epoch)
  select $10, lock.id, $12, $13, $14::jsonb, $11, lock.epoch from lock where $10::text is not null
  on conflict (idempotency_key) do update set status = excluded.status, epoch = excluded.epoch, updated_at = now()
   where ai_commands.status = excluded.status
      or (ai_commands.status = 'pending' and excluded.status = 'in_doubt'
          and ai_commands.resolution is distinct from 'retry')
  returning idempotency_key
), run as (
  update ai_runs r
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
), rec as (
  insert into ai_checkpoints (run_id, step_index, step_name, output, attempt, epoch, seq)
  select run.id, $15, $16, to_jsonb(run.due), 0, run.epoch, $18 from run where $15::int is not null
), cp as (
  insert into ai_checkpoints (run_id, step_index, step_name, output, attempt, epoch, meta, seq, fingerprint)
  select run.id, c.step_index, c.step_name, coalesce(c.output, 'null'::jsonb), 0, run.epoch, c.meta, c.seq, c.fingerprint
    from run, jsonb_to_recordset($17::jsonb) as c(step_index int, step_name text, output jsonb, meta jsonb, seq int, fingerprint text)
  on conflict (run_id, step_index) do nothing
), ev as (
  insert into ai_events (run_id, event_type, epoch, payload)
  select run.id, $8, run.epoch, $9::jsonb || jsonb_build_object('availableAt', run.available_at) from run
)
select available_at, due from run`;
