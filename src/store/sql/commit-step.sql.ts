/**
 * The fenced step write: ONE statement, one round trip. Used for the step commit (checkpoint + cursor
 * `done`, $10 = true resets `attempts`, since attempts count claims without progress) and for marking
 * a model/tool step `started` before it runs ($10 = false; $6 then carries values recorded by
 * ctx.now()/uuid()/random(), flushed before anything external can see them).
 * The UPDATE is fenced by (id, worker_id, epoch); the checkpoint and event inserts read from its
 * RETURNING, so when a newer claim has moved the epoch on, nothing at all is written and the caller
 * raises LeaseLostError.
 * $1 id, $2 worker, $3 epoch, $4 cursor, $5 ttl ms, $6 checkpoints [{step_index, step_name, output, meta}],
 * $7 attempt, $8 event type, $9 event payload, $10 progress made
 */
export const STEP_WRITE_SQL = `
with run as (
  update ai_runs
     set cursor = $4::jsonb, attempts = case when $10::boolean then 0 else attempts end,
         lease_expires_at = now() + $5 * interval '1 millisecond', updated_at = now()
   where id = $1 and worker_id = $2 and epoch = $3 and status = 'running'
  returning id, epoch, cancel_requested_at is not null as cancel_requested
), cp as (
  insert into ai_checkpoints (run_id, step_index, step_name, output, attempt, epoch, meta, seq, fingerprint)
  select run.id, c.step_index, c.step_name, coalesce(c.output, 'null'::jsonb), $7, run.epoch, c.meta, c.seq, c.fingerprint
    from run, jsonb_to_recordset($6::jsonb) as c(step_index int, step_name text, output jsonb, meta jsonb, seq int, fingerprint text)
  on conflict (run_id, step_index) do nothing
), ev as (
  insert into ai_events (run_id, event_type, epoch, payload)
  select run.id, $8, run.epoch, $9::jsonb from run
)
select cancel_requested from run`;

/**
 * Intra-step progress (ctx.progress): only the cursor moves, fenced. No event: the cursor inside a
 * step is position, not a run transition. $1 id, $2 worker, $3 epoch, $4 cursor, $5 ttl ms
 */
export const PROGRESS_SQL = `
update ai_runs
   set cursor = $4::jsonb, lease_expires_at = now() + $5 * interval '1 millisecond', updated_at = now()
 where id = $1 and worker_id = $2 and epoch = $3 and status = 'running'
returning cancel_requested_at is not null as cancel_requested`;
