/**
 * Cancel as a recorded request. A run nobody drives (pending/waiting) is cancelled at once; a running
 * one gets cancel_requested_at, which its worker observes at the next heartbeat or step boundary.
 * The row lock (FOR UPDATE) orders this against a concurrent claim. One event either way.
 * $1 run id, $2 reason, $3 event payload
 */
export const CANCEL_RUN_SQL = `
with cur as (
  select id, status, epoch from ai_runs where id = $1 for update
), upd as (
  -- Decided on the row's newest version (r), never on cur's: a claim that committed in between must
  -- not see its running row turned 'cancelled' with an owner (the status/owner check would fail).
  update ai_runs r
     set status = case when r.status in ('pending', 'waiting') then 'cancelled' else r.status end,
         finished_at = case when r.status in ('pending', 'waiting') then now() else r.finished_at end,
         cancel_requested_at = coalesce(r.cancel_requested_at, now()),
         cancel_reason = coalesce(r.cancel_reason, $2),
         updated_at = now()
    from cur
   where r.id = cur.id and r.status in ('pending', 'waiting', 'running')
  returning r.id, r.status, r.epoch, r.notify_on_finish
), doubt as (
  update ai_commands c set status = 'in_doubt', updated_at = now()
    from upd where c.run_id = upd.id and upd.status = 'cancelled' and c.status = 'pending'
), ev as (
  insert into ai_events (run_id, event_type, epoch, payload)
  select id, case when status = 'cancelled' then 'run.cancelled' else 'run.cancel_requested' end, epoch, $3::jsonb
    from upd
)
select cur.status as previous_status, upd.status as status,
       (select count(pg_notify('durable_execution_done', u.id::text)) from upd u
         where u.notify_on_finish and u.status = 'cancelled') as announced
  from cur left join upd on upd.id = cur.id`;
