import { MigrationInterface, QueryRunner } from 'typeorm';
import { durableNames } from '../src/store/durable-names';

/**
 * A schedule keeps the attempts of the runs it starts (`ai_schedules.max_attempts`), as the kind's
 * `@DurableWorkflow({ maxAttempts })` declares them where the schedule is declared or created (issue 36):
 * before, the process that fired a tick gave its runs the attempts its own registry knew, the module's
 * default when it did not register the kind. Null: the firing process's, as before.
 */
export class ScheduleAttempts1766800000000 implements MigrationInterface {
  name = 'ScheduleAttempts1766800000000';
  /** The PostgreSQL schema of the tables (see `durableExecutionMigrations`); unset: unqualified names. */
  schema?: string;

  public async up(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`alter table ${t.schedules} add column max_attempts integer check (max_attempts > 0)`);
  }

  public async down(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`alter table ${t.schedules} drop column max_attempts`);
  }
}
