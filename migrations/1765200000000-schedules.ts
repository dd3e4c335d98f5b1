import { MigrationInterface, QueryRunner } from 'typeorm';
import { durableNames } from '../src/store/durable-names';

/**
 * Durable cron schedules (`@DurableCron`): one row per schedule, written by the workers' processes that
 * register it. `next_at` is the next tick not yet fired; the statement that fires a tick inserts its run
 * (idempotency key `cron:<name>:<tick>`, so a tick gives one run however many pods fire it) and moves
 * `next_at` past the database's now, in one statement. `last_key`: the idempotency key of the last run
 * fired (the overlap policy asks whether it is still going). `source`: `code` (a `@DurableCron`, declared by
 * the processes that register it) or `api` (`DurableSchedules.create`).
 */
export class Schedules1765200000000 implements MigrationInterface {
  name = 'Schedules1765200000000';
  /** The PostgreSQL schema of the tables (see `durableExecutionMigrations`); unset: unqualified names. */
  schema?: string;

  public async up(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`
      create table ${t.schedules} (
        name        text primary key check (length(name) between 1 and 200),
        kind        text not null,
        cron        text not null,
        timezone    text not null default 'UTC',
        input       jsonb not null default '{}'::jsonb,
        catch_up    text not null default 'latest' check (catch_up in ('latest', 'all', 'skip')),
        overlap     text not null default 'allow' check (overlap in ('allow', 'skip')),
        next_at     timestamptz not null,
        last_at     timestamptz,
        last_key    text,
        paused      boolean not null default false,
        source      text not null default 'code' check (source in ('code', 'api')),
        created_at  timestamptz not null default now(),
        updated_at  timestamptz not null default now()
      )`);
    await q.query(`create index ai_schedules_due_idx on ${t.schedules} (next_at) where not paused`);
  }

  public async down(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`drop table ${t.schedules}`);
  }
}
