import { MigrationInterface, QueryRunner } from 'typeorm';
import { durableNames } from '../src/store/durable-names';

/**
 * `RunRepository.result(id)` waits for a run through NOTIFY, not by polling. A run is announced on
 * `durable_execution_done` when it ends only if someone waits for it (`notify_on_finish`, set by the
 * waiter), so runs nobody awaits add no NOTIFY (and no commit-time notify lock) to their finish.
 * Adding a column with a constant default is a catalogue change only: no table rewrite.
 */
export class RunResultNotify1764800000000 implements MigrationInterface {
  name = 'RunResultNotify1764800000000';
  /** The PostgreSQL schema of the tables (see `durableExecutionMigrations`); unset: unqualified names. */
  schema?: string;

  public async up(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`alter table ${t.runs} add column notify_on_finish boolean not null default false`);
  }

  public async down(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`alter table ${t.runs} drop column notify_on_finish`);
  }
}
