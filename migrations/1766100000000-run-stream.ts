import { MigrationInterface, QueryRunner } from 'typeorm';
import { durableNames } from '../src/store/durable-names';

/**
 * Progress streams (`ctx.emit`, `RunRepository.watch`): `ai_run_stream`, the entries of each run in the
 * order they were written (`seq` 1, 2, … per run, from `ai_runs.stream_seq`, which the fenced write of
 * each entry advances), each with the claim (`epoch`) that wrote it and, for an entry a step's body
 * emitted, the step (`step_index`) and its attempt. Deleted with their run.
 */
export class RunStream1766100000000 implements MigrationInterface {
  name = 'RunStream1766100000000';
  /** The PostgreSQL schema of the tables (see `durableExecutionMigrations`); unset: unqualified names. */
  schema?: string;

  public async up(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`alter table ${t.runs} add column stream_seq integer not null default 0`);
    await q.query(`
      create table ${t.stream} (
        run_id     uuid not null references ${t.runs}(id) on delete cascade,
        seq        integer not null check (seq >= 1),
        topic      text not null check (length(topic) between 1 and 200),
        data       jsonb,
        epoch      bigint not null,
        step_index integer,
        attempt    integer,
        created_at timestamptz not null default now(),
        primary key (run_id, seq)
      )`);
  }

  public async down(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`drop table ${t.stream}`);
    await q.query(`alter table ${t.runs} drop column stream_seq`);
  }
}
