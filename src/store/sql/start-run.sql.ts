/**
 * Insert a run and its `run.created` event in one statement. ON CONFLICT on the unique
 * idempotency_key makes a concurrent duplicate wait for the first insert and then insert nothing;
 * the caller reads the winner back. pg_notify is delivered at commit and wakes idle workers.
 * $1 kind, $2 input, $3 idempotency key, $4 max attempts, $5 run at, $6 priority, $7 event payload, $8 channel
 */
export const START_RUN_SQL = `
with ins as (
  insert into ai_runs (kind, input, idempotency_key, max_attempts, available_at, priority)
  values ($1, $2::jsonb, $3, $4, coalesce($5::timestamptz, now()), $6)
  on conflict (idempotency_key) do nothing
  returning *
), ev as (
  insert into ai_events (run_id, event_type, epoch, payload)
  select id, 'run.created', 0, $7::jsonb from ins
)
select ins.*, (select count(pg_notify($8, ins.kind)) from ins where ins.available_at <= now()) as notified
from ins`;

/**
 * Read back the run that owns an idempotency key (after a conflict), and whether its stored input
 * equals this start's (jsonb equality: key order and number spelling do not matter).
 * $1 idempotency key, $2 input
 */
export const RUN_BY_KEY_SQL = `select *, input = $2::jsonb as same_input from ai_runs where idempotency_key = $1`;
