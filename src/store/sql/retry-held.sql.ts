import type { SqlText } from '../durable-names';
import { pinnedVersion } from './pinned-version.sql';

/**
 * Re-drives up to $2 runs of kind $1 held on non-determinism (waiting with no due time and the
 * NonDeterminismError kept: `run.held`), oldest first, in one statement: back to `waiting`, due now,
 * attempts reset, error cleared, a `run.retried` event each ($3), and one NOTIFY. Rows another statement
 * holds are skipped (SKIP LOCKED): a second call takes them. Only those pinned to version $5 of the kind
 * (null: any version; a held run was claimed, so an unpinned one is version 1).
 * $1 kind, $2 limit, $3 event payload, $4 channel, $5 version
 */
export const RETRY_HELD_SQL: SqlText = (t) => `
with held as (
  select id from ${t.runs}
   where kind = $1 and status = 'waiting' and available_at = 'infinity'
     and error->>'code' = 'DURABLE_NON_DETERMINISM'
     and ($5::int is null or ${pinnedVersion()} = $5)
   order by created_at
   limit $2
   for update skip locked
), upd as (
  update ${t.runs} r
     set attempts = 0, available_at = now(), error = null, parked_reason = null, updated_at = now()
    from held where r.id = held.id
  returning r.id, r.epoch
), ev as (
  insert into ${t.events} (run_id, event_type, epoch, payload)
  select id, 'run.retried', epoch, $3::jsonb from upd
)
select (select count(*) from upd)::int as retried,
       (select count(pg_notify($4, $1)) from upd limit 1) as woke`;
