import { MigrationInterface, QueryRunner } from 'typeorm';
import { durableNames } from '../src/store/durable-names';

/**
 * Fleet-wide concurrency limits per kind and per key (`@DurableWorkflow(kind, { concurrency,
 * concurrencyKey, perKeyConcurrency })`).
 * - `ai_limits`: the caps of each kind, written by the workers that run it when they start.
 * - `ai_slots`: one row per slot of a scope (a kind, `["triage"]`, or a kind and key,
 *   `["triage", "tenant-a"]`). A claim takes a free slot of every scope its run needs, with SKIP
 *   LOCKED, in the statement that claims the run, and writes (run, epoch) into it; every statement that
 *   takes the run out of `running` frees it. The number of rows is the limit, so no two claims can
 *   both take "the last one".
 * - `ai_runs.concurrency_key`: the key of a run (computed at start). `ai_runs.limited_by`: the scope
 *   with no free slot when a claim found the run due; such a run leaves the claim index (the claim
 *   never rescans it) until a freed slot of that scope wakes it.
 */
export class ConcurrencyLimits1765100000000 implements MigrationInterface {
  name = 'ConcurrencyLimits1765100000000';
  /** The PostgreSQL schema of the tables (see `durableExecutionMigrations`); unset: unqualified names. */
  schema?: string;

  public async up(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`
      alter table ${t.runs}
        add column concurrency_key text check (length(concurrency_key) between 1 and 200),
        add column limited_by text`);
    await q.query(`drop index ${t.prefix}ai_runs_claim_idx`);
    await q.query(`
      create index ai_runs_claim_idx on ${t.runs} (priority desc, available_at)
        where status in ('pending', 'waiting') and limited_by is null`);
    await q.query(`
      create index ai_runs_limited_idx on ${t.runs} (limited_by, priority desc, available_at)
        where status in ('pending', 'waiting') and limited_by is not null`);
    await q.query(`
      create table ${t.limits} (
        kind       text primary key,
        kind_cap   integer check (kind_cap > 0),
        key_cap    integer check (key_cap > 0),
        updated_at timestamptz not null default now()
      )`);
    await q.query(`
      create table ${t.slots} (
        scope    text not null,
        n        integer not null check (n > 0),
        kind     text not null,
        run_id   uuid,
        epoch    bigint,
        taken_at timestamptz,
        primary key (scope, n),
        check ((run_id is null) = (epoch is null))
      )`);
    await q.query(`create index ai_slots_run_idx on ${t.slots} (run_id, epoch) where run_id is not null`);
    // The claim's: the free slots of a scope, lowest first (it never walks the taken ones).
    await q.query(`create index ai_slots_free_idx on ${t.slots} (scope, n) where run_id is null`);
    await q.query(`create index ai_slots_kind_idx on ${t.slots} (kind)`);
  }

  public async down(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`drop table ${t.slots}`);
    await q.query(`drop table ${t.limits}`);
    await q.query(`drop index ${t.prefix}ai_runs_limited_idx`);
    await q.query(`drop index ${t.prefix}ai_runs_claim_idx`);
    await q.query(`
      create index ai_runs_claim_idx on ${t.runs} (priority desc, available_at)
        where status in ('pending', 'waiting')`);
    await q.query(`alter table ${t.runs} drop column limited_by, drop column concurrency_key`);
  }
}
