/**
 * Reserve a command before dispatch, fenced, in one statement: the run's cursor says `started`, the
 * command row exists (new) or is taken back from pending / in_doubt / approved for a re-dispatch under
 * this epoch, and `tool.command_reserved` is in the trail. Returns the cancel flag so a cancelled run
 * never dispatches. $1 id, $2 worker, $3 epoch, $4 cursor, $5 ttl ms, $6 key, $7 step index, $8 name,
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
  select $6, run.id, $7, $8, $9::jsonb, 'pending', run.epoch from run
  on conflict (idempotency_key) do update
     set status = 'pending', epoch = excluded.epoch, resolution = null, updated_at = now()
   where ai_commands.status in ('pending', 'in_doubt', 'approved') and ai_commands.run_id = excluded.run_id
  returning idempotency_key
), cp as (
  insert into ai_checkpoints (run_id, step_index, step_name, output, attempt, epoch, meta)
  select run.id, c.step_index, c.step_name, c.output, 0, run.epoch, c.meta
    from run, jsonb_to_recordset($11::jsonb) as c(step_index int, step_name text, output jsonb, meta jsonb)
), ev as (
  insert into ai_events (run_id, event_type, epoch, payload)
  select run.id, 'tool.command_reserved', run.epoch, $10::jsonb from run
)
select run.cancel_requested, (select count(*) from cmd)::int as reserved from run`;

/**
 * Record a command's outcome with its checkpoint, fenced, in one statement: command row settled,
 * checkpoint (index → {status, result|error}), cursor `done`, attempts reset, one event.
 * $1 id, $2 worker, $3 epoch, $4 cursor, $5 ttl ms, $6 key, $7 status, $8 result, $9 error,
 * $10 checkpoint output, $11 step index, $12 step name, $13 event type, $14 event payload, $15 resolution
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
  insert into ai_checkpoints (run_id, step_index, step_name, output, attempt, epoch)
  select run.id, $11, $12, $10::jsonb, 0, run.epoch from run
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
 * $1 id, $2 worker, $3 epoch, $4 at, $5 delay ms, $6 attempts delta, $7 parked reason, $8 event type,
 * $9 event payload, $10 command key, $11 command status, $12 step index, $13 command name, $14 payload,
 * $15 record index, $16 record name, $17 recorded values
 */
export const PARK_RUN_SQL = `
with run as (
  update ai_runs
     set status = 'waiting', worker_id = null, lease_expires_at = null,
         available_at = coalesce($4::timestamptz, now() + $5 * interval '1 millisecond', 'infinity'),
         attempts = greatest(attempts + $6, 0), parked_reason = $7, updated_at = now()
   where id = $1 and worker_id = $2 and epoch = $3 and status = 'running'
  returning id, epoch, available_at
), cmd as (
  insert into ai_commands (idempotency_key, run_id, step_index, command_name, payload, status, epoch)
  select $10, run.id, $12, $13, $14::jsonb, $11, run.epoch from run where $10::text is not null
  on conflict (idempotency_key) do update set status = excluded.status, epoch = excluded.epoch, updated_at = now()
   where ai_commands.status in ('pending', 'in_doubt', 'awaiting_approval')
), rec as (
  insert into ai_checkpoints (run_id, step_index, step_name, output, attempt, epoch)
  select run.id, $15, $16, to_jsonb(run.available_at), 0, run.epoch from run where $15::int is not null
), cp as (
  insert into ai_checkpoints (run_id, step_index, step_name, output, attempt, epoch, meta)
  select run.id, c.step_index, c.step_name, c.output, 0, run.epoch, c.meta
    from run, jsonb_to_recordset($17::jsonb) as c(step_index int, step_name text, output jsonb, meta jsonb)
), ev as (
  insert into ai_events (run_id, event_type, epoch, payload)
  select run.id, $8, run.epoch, $9::jsonb || jsonb_build_object('availableAt', run.available_at) from run
)
select available_at from run`;
