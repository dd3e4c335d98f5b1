import { MigrationInterface, QueryRunner } from 'typeorm';
import { durableNames } from '../src/store/durable-names';

/**
 * Rate limits on starts (`@DurableWorkflow(kind, { rateLimit: { limit, periodMs, perKey } })`): at most
 * `limit` runs of a kind (or of one key) begin in any `periodMs`, fleet-wide. `ai_rate_tokens` holds
 * `limit` tokens per scope; the claim that begins a run (its first) takes a token whose `free_at` has
 * passed, SKIP LOCKED, and sets it `periodMs` ahead, in the claim statement: two begins on one token are
 * always a period apart, so no window of `periodMs` holds more than `limit`.
 */
export class RateLimits1765300000000 implements MigrationInterface {
  name = 'RateLimits1765300000000';
  /** The PostgreSQL schema of the tables (see `durableExecutionMigrations`); unset: unqualified names. */
  schema?: string;

  public async up(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`
      alter table ${t.limits}
        add column rate_limit integer check (rate_limit > 0),
        add column rate_period_ms integer check (rate_period_ms > 0),
        add column rate_per_key boolean not null default false`);
    await q.query(`
      create table ${t.rateTokens} (
        scope   text not null,
        n       integer not null check (n > 0),
        kind    text not null,
        free_at timestamptz not null default '-infinity',
        primary key (scope, n)
      )`);
    await q.query(`create index ai_rate_tokens_free_idx on ${t.rateTokens} (scope, free_at)`);
    await q.query(`create index ai_rate_tokens_kind_idx on ${t.rateTokens} (kind)`);
  }

  public async down(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`drop table ${t.rateTokens}`);
    await q.query(
      `alter table ${t.limits} drop column rate_per_key, drop column rate_period_ms, drop column rate_limit`,
    );
  }
}
