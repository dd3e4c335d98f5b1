import { MigrationInterface, QueryRunner } from 'typeorm';
import { durableNames } from '../src/store/durable-names';

/**
 * Continue-as-new (`ctx.continueAsNew`): `ai_runs.generation`, how many times the run handed its state
 * to a fresh history of itself. Command keys and child keys of a later generation name it, so they never
 * meet those of an earlier one.
 */
export class RunGenerations1766200000000 implements MigrationInterface {
  name = 'RunGenerations1766200000000';
  /** The PostgreSQL schema of the tables (see `durableExecutionMigrations`); unset: unqualified names. */
  schema?: string;

  public async up(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`alter table ${t.runs} add column generation integer not null default 0`);
  }

  public async down(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`alter table ${t.runs} drop column generation`);
  }
}
