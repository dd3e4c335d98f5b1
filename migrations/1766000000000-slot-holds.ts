import { MigrationInterface, QueryRunner } from 'typeorm';
import { durableNames } from '../src/store/durable-names';

/**
 * Two follow-ups of flow control: `ai_limits.hold_waiting` (`holdSlotWhileWaiting`: a kind's runs keep
 * their concurrency slots while they wait) and `ai_schedules.concurrency_key` (the key of the runs a
 * schedule starts, for its kind's `perKeyConcurrency`).
 */
export class SlotHolds1766000000000 implements MigrationInterface {
  name = 'SlotHolds1766000000000';
  /** The PostgreSQL schema of the tables (see `durableExecutionMigrations`); unset: unqualified names. */
  schema?: string;

  public async up(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`alter table ${t.limits} add column hold_waiting boolean not null default false`);
    await q.query(
      `alter table ${t.schedules} add column concurrency_key text check (length(concurrency_key) between 1 and 200)`,
    );
  }

  public async down(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`alter table ${t.schedules} drop column concurrency_key`);
    await q.query(`alter table ${t.limits} drop column hold_waiting`);
  }
}
