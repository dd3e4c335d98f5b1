import { MigrationInterface, QueryRunner } from 'typeorm';
import { durableNames } from '../src/store/durable-names';

/**
 * Tags (`StartRunOptions.tags`, `ctx.setTags`): `ai_runs.tags`, a JSON object of short strings (null when a
 * run has none), and a GIN index (`jsonb_path_ops`, over the runs that have tags) that answers
 * `tags @> '{"tenant":"acme"}'`: `RunRepository.list({ tags })` finds a tenant's runs among millions
 * without reading the others.
 */
export class RunTags1765900000000 implements MigrationInterface {
  name = 'RunTags1765900000000';
  /** The PostgreSQL schema of the tables (see `durableExecutionMigrations`); unset: unqualified names. */
  schema?: string;

  public async up(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`alter table ${t.runs} add column tags jsonb check (jsonb_typeof(tags) = 'object')`);
    await q.query(
      `create index ai_runs_tags_idx on ${t.runs} using gin (tags jsonb_path_ops) where tags is not null`,
    );
  }

  public async down(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`drop index ${t.prefix}ai_runs_tags_idx`);
    await q.query(`alter table ${t.runs} drop column tags`);
  }
}
