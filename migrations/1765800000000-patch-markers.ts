import { MigrationInterface, QueryRunner } from 'typeorm';
import { durableNames } from '../src/store/durable-names';

/**
 * `ctx.patched(id)` records its marker at a negative position of its own (-1 … -2^30, from a hash of the
 * id), outside the sequence that steps and commands take: the checkpoints' `step_index >= 0` check
 * becomes `>= -2^30`.
 */
export class PatchMarkers1765800000000 implements MigrationInterface {
  name = 'PatchMarkers1765800000000';
  /** The PostgreSQL schema of the tables (see `durableExecutionMigrations`); unset: unqualified names. */
  schema?: string;

  public async up(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`alter table ${t.checkpoints} drop constraint ai_checkpoints_step_index_check`);
    await q.query(
      `alter table ${t.checkpoints} add constraint ai_checkpoints_step_index_check check (step_index >= -1073741824)`,
    );
  }

  public async down(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`delete from ${t.checkpoints} where step_index < 0`);
    await q.query(`alter table ${t.checkpoints} drop constraint ai_checkpoints_step_index_check`);
    await q.query(
      `alter table ${t.checkpoints} add constraint ai_checkpoints_step_index_check check (step_index >= 0)`,
    );
  }
}
