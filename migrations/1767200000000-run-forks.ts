import { MigrationInterface, QueryRunner } from 'typeorm';
import { durableNames } from '../src/store/durable-names';

/**
 * Time travel (`RunRepository.fork`): a run started from another run's record names its origin,
 * `ai_runs.forked_from` (the original's id; no foreign key: retention may delete the original, the
 * fork keeps its own copy of what it inherited) and `fork_step` (the first position it executed
 * itself). Both nullable (expand only: a release before this one writes runs without them); a partial
 * index lists the forks of a run.
 */
export class RunForks1767200000000 implements MigrationInterface {
  name = 'RunForks1767200000000';
  /** The PostgreSQL schema of the tables (see `durableExecutionMigrations`); unset: unqualified names. */
  schema?: string;

  public async up(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`alter table ${t.runs} add column forked_from uuid, add column fork_step integer`);
    await q.query(
      `create index ai_runs_forked_from_idx on ${t.runs} (forked_from) where forked_from is not null`,
    );
  }

  public async down(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`drop index ${t.prefix}ai_runs_forked_from_idx`);
    await q.query(`alter table ${t.runs} drop column fork_step, drop column forked_from`);
  }
}
