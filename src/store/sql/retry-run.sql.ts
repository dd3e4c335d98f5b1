/**
 * Re-drive a dead-lettered (or failed) run from its last checkpoint: back to `waiting`, attempts
 * reset, error kept in the event. Checkpoints are untouched, so replay skips every committed step.
 * $1 run id, $2 event payload, $3 channel
 */
export const RETRY_RUN_SQL = `
with cur as (
  select id, status from ai_runs where id = $1 for update
), upd as (
  update ai_runs r
     set status = 'waiting', attempts = 0, available_at = now(), error = null, finished_at = null,
         parked_reason = null, updated_at = now()
    from cur
   where r.id = cur.id and cur.status in ('dead_lettered', 'failed')
  returning r.id, r.epoch, r.kind
), ev as (
  insert into ai_events (run_id, event_type, epoch, payload)
  select id, 'run.retried', epoch, $2::jsonb from upd
)
select cur.status as previous_status, (select count(pg_notify($3, upd.kind)) from upd) as woke
  from cur`;
