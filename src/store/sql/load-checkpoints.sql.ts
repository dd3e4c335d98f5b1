/**
 * Everything replay needs, in one round trip per claim: the run's checkpoints (with their delivery
 * order and call fingerprint) and its commands (by idempotency key, to settle in-doubt ones). Replay
 * then reads memory, never one query per step. A first claim (epoch 1) skips this entirely: nothing
 * can have been recorded before it. $1 run id
 */
export const LOAD_REPLAY_SQL = `
select 'checkpoint' as source, step_index, step_name as name, output, null::text as status,
       null::jsonb as error, null::text as resolution, seq, fingerprint, null::jsonb as payload
  from ai_checkpoints where run_id = $1
union all
select 'command', step_index, idempotency_key, result, status, error, resolution, null, null, payload
  from ai_commands where run_id = $1`;
