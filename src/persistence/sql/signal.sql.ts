/**
 * Consume the oldest unconsumed signal of this name, fenced, in one statement: the signal is marked
 * consumed, its payload becomes the wait's checkpoint, and `signal.received` is in the trail. SKIP
 * LOCKED keeps two stale claims from consuming one signal twice (the fence also forbids it).
 * $1 id, $2 worker, $3 epoch, $4 ttl ms, $5 name, $6 step index, $7 step name, $8 recorded values
 */
export const CONSUME_SIGNAL_SQL = `
with run as (
  update ai_runs set lease_expires_at = now() + $4 * interval '1 millisecond', attempts = 0, updated_at = now()
   where id = $1 and worker_id = $2 and epoch = $3 and status = 'running'
  returning id, epoch
), sig as (
  update ai_signals s set consumed_at = now()
   where s.id = (select p.id from ai_signals p join run on p.run_id = run.id
                  where p.name = $5 and p.consumed_at is null
                  order by p.id limit 1 for update of p skip locked)
  returning s.payload
), cp as (
  insert into ai_checkpoints (run_id, step_index, step_name, output, attempt, epoch)
  select run.id, $6, $7, jsonb_build_object('payload', sig.payload), 0, run.epoch from run, sig
), recs as (
  insert into ai_checkpoints (run_id, step_index, step_name, output, attempt, epoch, meta)
  select run.id, c.step_index, c.step_name, c.output, 0, run.epoch, c.meta
    from run, sig, jsonb_to_recordset($8::jsonb) as c(step_index int, step_name text, output jsonb, meta jsonb)
), ev as (
  insert into ai_events (run_id, event_type, epoch, payload)
  select run.id, 'signal.received', run.epoch, jsonb_build_object('name', $5::text, 'step', $6::int) from run, sig
)
select (select count(*) from run)::int as owned, (select payload from sig) as payload,
       (select count(*) from sig)::int as consumed`;

/**
 * Store a signal durably and wake the run if it is waiting (a signal sent before the wait is kept for
 * it). One event (with who sent it, when known); NOTIFY at commit wakes an idle worker.
 * $1 run id, $2 name, $3 payload, $4 channel, $5 sent by (null: not recorded)
 */
export const SEND_SIGNAL_SQL = `
with cur as (
  select id, status, kind, epoch from ai_runs where id = $1 for update
), ins as (
  insert into ai_signals (run_id, name, payload)
  select id, $2, $3::jsonb from cur where status in ('pending', 'running', 'waiting')
  returning id
), wake as (
  update ai_runs r set available_at = now(), updated_at = now()
    from cur where r.id = cur.id and cur.status = 'waiting' and exists (select 1 from ins)
  returning r.kind
), ev as (
  insert into ai_events (run_id, event_type, epoch, payload)
  select cur.id, 'signal.sent', cur.epoch, jsonb_strip_nulls(jsonb_build_object('name', $2::text, 'by', $5::text))
    from cur, ins
)
select cur.status, (select count(*) from ins)::int as stored,
       (select count(pg_notify($4, kind)) from wake)::int as woke
  from cur`;
