import { MigrationInterface, QueryRunner } from 'typeorm';
import { durableNames } from '../src/store/durable-names';
import { CURRENT_TIMELINE } from '../src/store/sql/timeline.sql';

/**
 * Fencing across a failover: `ai_runs.timeline`, the WAL timeline of the server when the run was created
 * or last claimed (a promotion or a point-in-time recovery starts a new one), and `ai_runs.lookup_first`,
 * set by a claim that finds the run last claimed on another timeline: the commits it made there may be
 * lost, so each of its commands is settled by its in-doubt policy before its first send. Rows from before
 * keep a null timeline (read as "no failover since").
 */
export class FencingTimelines1766400000000 implements MigrationInterface {
  name = 'FencingTimelines1766400000000';
  /** The PostgreSQL schema of the tables (see `durableExecutionMigrations`); unset: unqualified names. */
  schema?: string;

  public async up(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`alter table ${t.runs} add column timeline integer`);
    // A default for new rows only (setting it after the column exists rewrites no existing row).
    await q.query(`alter table ${t.runs} alter column timeline set default ${CURRENT_TIMELINE}`);
    await q.query(`alter table ${t.runs} add column lookup_first boolean not null default false`);
  }

  public async down(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`alter table ${t.runs} drop column lookup_first`);
    await q.query(`alter table ${t.runs} drop column timeline`);
  }
}
