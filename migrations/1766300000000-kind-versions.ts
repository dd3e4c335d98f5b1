import { MigrationInterface, QueryRunner } from 'typeorm';
import { durableNames } from '../src/store/durable-names';

/**
 * Versioned kinds (`@DurableWorkflow(kind, { version })`): `ai_runs.kind_version`, the version a run is
 * pinned to (null until its first claim pins it; a run claimed before this migration reads as version
 * 1), and `ai_workers.versions`, the versions of each kind a worker serves (`{"kind": [2, 1]}`).
 */
export class KindVersions1766300000000 implements MigrationInterface {
  name = 'KindVersions1766300000000';
  /** The PostgreSQL schema of the tables (see `durableExecutionMigrations`); unset: unqualified names. */
  schema?: string;

  public async up(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`alter table ${t.runs} add column kind_version integer`);
    await q.query(`alter table ${t.workers} add column versions jsonb not null default '{}'::jsonb`);
  }

  public async down(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`alter table ${t.workers} drop column versions`);
    await q.query(`alter table ${t.runs} drop column kind_version`);
  }
}
