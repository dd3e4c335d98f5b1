import type { SqlText } from '../durable-names';

/**
 * Store a signal durably and wake the run if it is waiting (a signal sent before the wait is kept for
 * it). A running run's row is touched too, so a wait parking at this moment sees that its row changed
 * and stays due (WAIT_FOR_SIGNAL_SQL). One event (with who sent it, when known); NOTIFY at commit
 * wakes an idle worker.
 * $1 run id, $2 name, $3 payload, $4 channel, $5 sent by (null: not recorded), $6 the run's kind as the
 * sender expects it (null: any; another kind stores nothing)
 */
export const SEND_SIGNAL_SQL: SqlText = (t) => `
with cur as (
  select id, status, kind, epoch from ${t.runs} where id = $1 for update
), ins as (
  insert into ${t.signals} (run_id, name, payload)
  select id, $2, $3::jsonb from cur where status in ('pending', 'running', 'waiting')
     and kind = coalesce($6::text, kind)
  returning id
), wake as (
  update ${t.runs} r set available_at = case when cur.status = 'waiting' then now() else r.available_at end,
         updated_at = now()
    from cur where r.id = cur.id and cur.status in ('waiting', 'running') and exists (select 1 from ins)
  returning r.id, r.kind, cur.status
), ev as (
  insert into ${t.events} (run_id, event_type, epoch, payload)
  select cur.id, 'signal.sent', cur.epoch, jsonb_strip_nulls(jsonb_build_object('name', $2::text, 'by', $5::text))
    from cur, ins
)
select cur.status, cur.kind, (select count(*) from ins)::int as stored,
       (select count(pg_notify($4, kind)) from wake where wake.status = 'waiting')::int as woke,
       -- A running run's worker learns at once (its pending waits settle: WaitBoard).
       (select count(pg_notify($4, '$signal:' || wake.id)) from wake where wake.status = 'running')::int as told
  from cur`;
