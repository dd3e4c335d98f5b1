import { MigrationInterface, QueryRunner } from 'typeorm';
import { durableNames, ensureSchema } from '../src/store/durable-names';

/**
 * The four tables of the durable record. The run row holds position (`cursor`) and ownership
 * (`worker_id`, `epoch`, `lease_expires_at`) together so one fenced UPDATE moves both.
 */
export class CreateDurableExecutionSchema1764400000000 implements MigrationInterface {
  name = 'CreateDurableExecutionSchema1764400000000';
  /** The PostgreSQL schema of the tables (see `durableExecutionMigrations`); unset: unqualified names. */
  schema?: string;

  public async up(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    // Created here too for an app that runs these with its own migrations table (in another schema).
    if (t.schema) await ensureSchema(q, t.schema);
    await q.query(`
      create table ${t.runs} (
        id                  uuid primary key default gen_random_uuid(),
        kind                text not null check (length(kind) between 1 and 200),
        status              text not null default 'pending' check (status in
                              ('pending', 'running', 'waiting', 'succeeded', 'failed', 'cancelled', 'dead_lettered')),
        input               jsonb not null,
        state               jsonb not null default '{}'::jsonb,
        output              jsonb,
        cursor              jsonb not null default '{"step": 0, "name": null, "status": "pending", "attempt": 0, "item": null}'::jsonb,
        epoch               bigint not null default 0 check (epoch >= 0),
        worker_id           text,
        lease_expires_at    timestamptz,
        available_at        timestamptz not null default now(),
        priority            integer not null default 0,
        attempts            integer not null default 0 check (attempts >= 0),
        max_attempts        integer not null default 5 check (max_attempts > 0),
        idempotency_key     text unique,
        cancel_requested_at timestamptz,
        cancel_reason       text,
        parked_reason       text,
        error               jsonb,
        created_at          timestamptz not null default now(),
        updated_at          timestamptz not null default now(),
        finished_at         timestamptz,
        check ((status = 'running') = (worker_id is not null and lease_expires_at is not null))
      )`);
    // The claim query's index: only claimable rows, in claim order. Terminal runs never enter it,
    // so claim cost stays flat as history grows.
    await q.query(`
      create index ai_runs_claim_idx on ${t.runs} (priority desc, available_at)
        where status in ('pending', 'waiting')`);
    // The reconciler's index: running rows by lease expiry.
    await q.query(`create index ai_runs_lease_idx on ${t.runs} (lease_expires_at) where status = 'running'`);
    await q.query(`create index ai_runs_list_idx on ${t.runs} (created_at desc, id desc)`);
    await q.query(`create index ai_runs_worker_idx on ${t.runs} (worker_id) where status = 'running'`);

    await q.query(`
      create table ${t.checkpoints} (
        run_id     uuid not null references ${t.runs}(id) on delete cascade,
        step_index integer not null check (step_index >= 0),
        step_name  text not null,
        output     jsonb not null,
        attempt    integer not null default 0,
        epoch      bigint not null,
        meta       jsonb,
        created_at timestamptz not null default now(),
        primary key (run_id, step_index)
      )`);

    await q.query(`
      create table ${t.commands} (
        idempotency_key text primary key,
        run_id          uuid not null references ${t.runs}(id) on delete cascade,
        step_index      integer not null,
        command_name    text not null,
        payload         jsonb not null,
        status          text not null default 'pending' check (status in
                          ('pending', 'succeeded', 'failed', 'in_doubt', 'awaiting_approval', 'rejected')),
        result          jsonb,
        error           jsonb,
        epoch           bigint not null,
        approved_by     text,
        resolution      text,
        created_at      timestamptz not null default now(),
        updated_at      timestamptz not null default now()
      )`);
    await q.query(`create index ai_commands_run_idx on ${t.commands} (run_id, step_index)`);
    await q.query(`
      create index ai_commands_unsettled_idx on ${t.commands} (run_id)
        where status in ('pending', 'in_doubt', 'awaiting_approval')`);

    await q.query(`
      create table ${t.events} (
        id         bigint generated always as identity primary key,
        run_id     uuid not null references ${t.runs}(id) on delete cascade,
        event_type text not null,
        epoch      bigint not null default 0,
        payload    jsonb not null default '{}'::jsonb,
        created_at timestamptz not null default now()
      )`);
    await q.query(`create index ai_events_run_idx on ${t.events} (run_id, id)`);
    await q.query(`create index ai_events_created_idx on ${t.events} (created_at)`);

    // Durable signals: stored before the wait that consumes them, so an early signal is never lost.
    await q.query(`
      create table ${t.signals} (
        id          bigint generated always as identity primary key,
        run_id      uuid not null references ${t.runs}(id) on delete cascade,
        name        text not null,
        payload     jsonb not null default 'null'::jsonb,
        consumed_at timestamptz,
        created_at  timestamptz not null default now()
      )`);
    await q.query(
      `create index ai_signals_pending_idx on ${t.signals} (run_id, name, id) where consumed_at is null`,
    );
  }

  /** Drops the tables; a schema of their own stays (it may hold `ai_migrations` or anything else). */
  public async down(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`drop table if exists ${t.signals}`);
    await q.query(`drop table if exists ${t.events}`);
    await q.query(`drop table if exists ${t.commands}`);
    await q.query(`drop table if exists ${t.checkpoints}`);
    await q.query(`drop table if exists ${t.runs}`);
  }
}
