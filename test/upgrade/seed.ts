import { Client } from 'pg';

/**
 * Rows of every table of the previous release's schema (0.2.0: runs, checkpoints, commands, events,
 * signals, admin sessions), as its workers leave them: `runs` runs of which a tenth are running, a tenth
 * waiting, a tenth pending and the rest finished, each with `eventsPerRun` events, 3 checkpoints, a
 * command every other run and a signal every fifth, created over the last 10 days. The compatibility
 * check seeds a few (a migration's work on a table shows as rows written or a rewrite); the migration
 * timings in docs/UPGRADING.md come from 100,000 runs and 1,000,000 events. Written for 0.2.0's columns:
 * when PREVIOUS_RELEASE moves on, this follows its schema.
 */
export async function seedPreviousRelease(c: Client, runs: number, eventsPerRun = 10): Promise<void> {
  await c.query(
    `insert into ai_runs (id, kind, status, input, state, output, cursor, epoch, worker_id, lease_expires_at,
                          available_at, attempts, idempotency_key, created_at, updated_at, finished_at)
     select md5('run' || i)::uuid, 'kind-' || (i % 7),
            s.status, jsonb_build_object('n', i, 'text', repeat('x', 200)), '{}'::jsonb,
            case when s.status = 'succeeded' then jsonb_build_object('ok', i) end,
            jsonb_build_object('step', 3, 'name', 'step-3', 'status', 'done', 'attempt', 1, 'item', null),
            1 + i % 3,
            case when s.status = 'running' then 'seed-worker' end,
            case when s.status = 'running' then now() + interval '1 hour' end,
            t.at, 1, case when i % 2 = 0 then 'key-' || i end, t.at, t.at,
            case when s.status in ('succeeded', 'failed', 'cancelled') then t.at + interval '1 minute' end
       from generate_series(1, $1::int) i,
            lateral (select case i % 10 when 0 then 'running' when 1 then 'waiting' when 2 then 'pending'
                                        when 3 then 'failed' when 4 then 'cancelled' else 'succeeded' end
                              as status) s,
            lateral (select now() - (i::float / $1 * interval '10 days') as at) t`,
    [runs],
  );
  await c.query(
    `insert into ai_checkpoints (run_id, step_index, step_name, output, attempt, epoch, meta, created_at, seq)
     select r.id, k, 'step-' || k, jsonb_build_object('value', repeat('y', 300)), 1, r.epoch, null,
            r.created_at, k
       from ai_runs r, generate_series(0, 2) k`,
  );
  await c.query(
    `insert into ai_commands (idempotency_key, run_id, step_index, command_name, payload, status, result, epoch,
                              created_at, updated_at)
     select r.id || ':3', r.id, 3, 'charge', '{"amount": 100}'::jsonb,
            case when r.status = 'running' then 'pending' when r.status = 'waiting' then 'in_doubt'
                 else 'succeeded' end,
            case when r.status not in ('running', 'waiting') then '{"chargeId": "ch"}'::jsonb end,
            r.epoch, r.created_at, r.updated_at
       from ai_runs r where get_byte(decode(replace(r.id::text, '-', ''), 'hex'), 0) % 2 = 0`,
  );
  await c.query(
    `insert into ai_events (run_id, event_type, epoch, payload, created_at)
     select r.id, 'step.completed', r.epoch, jsonb_build_object('step', k, 'name', 'step-' || k),
            r.created_at + k * interval '1 second'
       from ai_runs r, generate_series(1, $1::int) k`,
    [eventsPerRun],
  );
  await c.query(
    `insert into ai_signals (run_id, name, payload, consumed_at, created_at)
     select r.id, 'approve', '{"ok": true}'::jsonb, case when r.status <> 'waiting' then r.updated_at end,
            r.created_at
       from ai_runs r where get_byte(decode(replace(r.id::text, '-', ''), 'hex'), 1) % 5 = 0`,
  );
  await c.query(
    `insert into ai_admin_sessions (token_hash, operator, key_ref, salt, expires_at)
     select md5('session' || i), 'operator', 'key', 'salt', now() + interval '1 day'
       from generate_series(1, 10) i`,
  );
  await c.query('analyze');
}
