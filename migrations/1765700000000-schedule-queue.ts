import { MigrationInterface, QueryRunner } from 'typeorm';
import { durableNames } from '../src/store/durable-names';

/** `@DurableCron(…, { overlap: 'queue' })`: a tick waits for the schedule's previous run to end. */
export class ScheduleQueue1765700000000 implements MigrationInterface {
  name = 'ScheduleQueue1765700000000';
  /** The PostgreSQL schema of the tables (see `durableExecutionMigrations`); unset: unqualified names. */
  schema?: string;

  public async up(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`alter table ${t.schedules} drop constraint ai_schedules_overlap_check`);
    await q.query(
      `alter table ${t.schedules} add constraint ai_schedules_overlap_check check (overlap in ('allow', 'skip', 'queue'))`,
    );
  }

  public async down(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`update ${t.schedules} set overlap = 'skip' where overlap = 'queue'`);
    await q.query(`alter table ${t.schedules} drop constraint ai_schedules_overlap_check`);
    await q.query(
      `alter table ${t.schedules} add constraint ai_schedules_overlap_check check (overlap in ('allow', 'skip'))`,
    );
  }
}
