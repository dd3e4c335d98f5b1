import { MigrationInterface, QueryRunner } from 'typeorm';
import { durableNames } from '../src/store/durable-names';

/**
 * `ai_runs.record_format` (issue 48): the format of the records a run holds (its checkpoints, commands,
 * events and cursor), as the release that wrote them numbers it (`RECORD_FORMAT`). Every claim takes
 * only runs whose format it can replay (`record_format <= RECORD_FORMAT`), so a later release that
 * writes records this one does not know raises the number on its runs, and the workers of this release
 * leave them alone during a rolling upgrade. Runs written before (and by processes of a release that
 * does not name the column) are format 1. Expand-only and cheap: a NOT NULL column with a constant
 * default is a change of the catalog in PostgreSQL 11 and later (no table rewrite, no scan); it takes
 * ai_runs' ACCESS EXCLUSIVE lock for that moment only.
 */
export class RecordFormat1766995000000 implements MigrationInterface {
  name = 'RecordFormat1766995000000';
  /** The PostgreSQL schema of the tables (see `durableExecutionMigrations`); unset: unqualified names. */
  schema?: string;

  public async up(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`alter table ${t.runs} add column record_format smallint not null default 1`);
  }

  public async down(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`alter table ${t.runs} drop column record_format`);
  }
}
