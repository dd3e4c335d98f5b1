import { MigrationInterface, QueryRunner } from 'typeorm';
import { durableNames } from '../src/store/durable-names';

/**
 * A `ctx.sleep` records its due time when it is called (issue 35: a timer, as in JavaScript) at a
 * negative position of its own, below the patch markers' (-2^30 - 1 - the sleep's position), outside the
 * sequence that steps and commands take: the checkpoints' `step_index >= -2^30` check is dropped (every
 * integer is a position now: >= 0 calls, -1 … -2^30 patch markers, below them sleeps' due times).
 */
export class SleepDuePositions1766600000000 implements MigrationInterface {
  name = 'SleepDuePositions1766600000000';
  /** The PostgreSQL schema of the tables (see `durableExecutionMigrations`); unset: unqualified names. */
  schema?: string;

  public async up(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`alter table ${t.checkpoints} drop constraint ai_checkpoints_step_index_check`);
  }

  public async down(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`delete from ${t.checkpoints} where step_index < -1073741824`);
    await q.query(
      `alter table ${t.checkpoints} add constraint ai_checkpoints_step_index_check check (step_index >= -1073741824)`,
    );
  }
}
