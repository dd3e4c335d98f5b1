/**
 * Retention's second horizon, one batch in one statement: whole finished runs (any terminal status)
 * that finished more than $1 ms ago (database clock) are deleted; ON DELETE CASCADE takes their
 * checkpoints, commands, events and signals with them, so a later `retry` answers "run not found"
 * instead of replaying from nothing. Runs with an unsettled command stay for the operator.
 * SKIP LOCKED: a concurrent retry or cancel is never waited on; that row is left for the next sweep.
 * $1 age in ms, $2 batch size
 */
export const RETENTION_DELETE_RUNS_SQL = `
with h as (
  select now() - $1::float8 * interval '1 millisecond' as before
), victims as (
  select r.id from ai_runs r, h
   where r.status in ('succeeded', 'failed', 'cancelled', 'dead_lettered')
     and r.created_at < h.before and r.finished_at < h.before
     and not exists (select 1 from ai_commands c where c.run_id = r.id
                      and c.status in ('pending', 'in_doubt', 'awaiting_approval', 'approved'))
   order by r.created_at, r.id
   limit $2
   for update skip locked
), del as (
  delete from ai_runs r using victims v where r.id = v.id returning r.id
)
select count(*)::int as runs from del`;
