import { MigrationInterface, QueryRunner } from 'typeorm';
import { durableNames } from '../src/store/durable-names';
import { CURRENT_TIMELINE } from '../src/store/sql/timeline.sql';

/**
 * Schedules across a failover: `ai_schedules.timeline`, the WAL timeline of the server when the schedule
 * was declared or last fired. A firing that finds another one may fire again a tick whose first run was
 * lost with the old primary's last commits: its run then settles each command by its in-doubt policy
 * before a first send (`ai_runs.lookup_first`). Rows from before keep a null timeline ("no failover
 * since").
 */
export class ScheduleTimelines1766500000000 implements MigrationInterface {
  name = 'ScheduleTimelines1766500000000';
  /** The PostgreSQL schema of the tables (see `durableExecutionMigrations`); unset: unqualified names. */
  schema?: string;

  public async up(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`alter table ${t.schedules} add column timeline integer`);
    await q.query(`alter table ${t.schedules} alter column timeline set default ${CURRENT_TIMELINE}`);
  }

  public async down(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`alter table ${t.schedules} drop column timeline`);
  }
}
