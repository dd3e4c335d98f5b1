import type { SqlText } from './durable-names';
import { keyLimitRows } from './run-state/slots';
import { seededUuid } from './sql/seeded-uuid.sql';
import { CURRENT_TIMELINE } from './sql/timeline.sql';
import { RECORD_FORMAT } from './record-format';

/**
 * Fires one schedule's due ticks in one statement: locks its row (SKIP LOCKED: another process is firing
 * it) while it still waits for the tick this process read ($2), inserts a run per tick to fire (unless
 * the overlap policy says the last one is still going), each keyed `cron:<name>:<tick>` (a tick gives
 * one run whatever happens), with its `run.created` event, and moves the row to its next tick ($3).
 * The runs get the schedule's concurrency key, and that key its slots and tokens when its kind has
 * per-key limits (`keyLimitRows`). A tick's run has an id made from the schedule's creation time and
 * its key, the same if a failover lost it and the tick fires again; when the schedule was last fired
 * (or declared) on another WAL timeline, its runs look up each command before a first send
 * (`lookup_first`: the lost firing may have run and sent them), and the row takes the server's.
 * `overlap: 'queue'`: while the last run is going nothing fires and the row stays (its tick is still
 * due, asked again every second); then only the oldest due tick fires, and the row moves to the next
 * one ($6[2], itself due at once) or to $3.
 * $1 name, $2 next tick read, $3 next tick after now, $4 keys, $5 inputs (JSON text), $6 ticks,
 * $7 max attempts when the schedule holds none (the firing process's), $8 wake channel. Answers, besides the counts, whether it locked the row (`locked`:
 * 0 when another process holds it or it no longer waits for $2) and the ids of the runs it started.
 */
export const FIRE_SQL: SqlText = (t) => `
with cur as (
  select * from ${t.schedules} where name = $1 and next_at = $2 and not paused for update skip locked
), busy as (
  select exists (select 1 from ${t.runs} r join cur on r.idempotency_key = cur.last_key
                  where r.status not in ('succeeded', 'failed', 'cancelled', 'dead_lettered')) as b
), fire as (
  select f.key, f.input::jsonb as input, f.at
    from cur, unnest($4::text[], $5::text[], $6::timestamptz[]) as f(key, input, at)
   where (cur.overlap = 'allow' or not (select b from busy))
     and (cur.overlap <> 'queue' or f.at = $6[1])
), ins as (
  insert into ${t.runs} (id, kind, input, idempotency_key, max_attempts, concurrency_key, lookup_first, record_format)
  select ${seededUuid(`extract(epoch from cur.created_at)::text || '/' || fire.key`)}, cur.kind, fire.input,
         fire.key, coalesce(cur.max_attempts, $7), cur.concurrency_key, coalesce(cur.timeline <> ${CURRENT_TIMELINE}, false),
         ${RECORD_FORMAT}
    from cur, fire
  on conflict (idempotency_key) do nothing
  returning id, kind, idempotency_key, input, concurrency_key
), ${keyLimitRows(t, 'ins')}, ev as (
  insert into ${t.events} (run_id, event_type, epoch, payload)
  select id, 'run.created', 0, jsonb_build_object('kind', kind, 'idempotencyKey', idempotency_key,
                                                  'schedule', $1::text, 'scheduledAt', input->'scheduledAt')
    from ins
), moved as (
  update ${t.schedules} s
     set next_at = case when cur.overlap = 'queue' and cardinality($6::timestamptz[]) > 1
                        then ($6::timestamptz[])[2] else $3 end,
         updated_at = now(), timeline = ${CURRENT_TIMELINE},
         last_at = coalesce((select max(at) from fire), s.last_at),
         last_key = coalesce((select key from fire order by at desc limit 1), s.last_key)
    from cur where s.name = cur.name and not (cur.overlap = 'queue' and (select b from busy))
  returning s.name
)
select (select count(*) from moved)::int as moved, (select count(*) from fire)::int as fired,
       (select count(*) from ins)::int as started, (select count(pg_notify($8, kind)) from ins)::int as woke,
       (select count(*) from cur)::int as locked, array(select id::text from ins order by idempotency_key) as ids`;
