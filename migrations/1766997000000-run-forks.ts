import { MigrationInterface, QueryRunner } from 'typeorm';
import { durableNames } from '../src/store/durable-names';

/**
 * Time travel. `RunRepository.fork`: a run started from another run's record names its origin,
 * `ai_runs.forked_from` (the original's id; no foreign key: retention may delete the original, the
 * fork keeps its own copy of what it inherited) and `fork_step` (the first position it executed
 * itself), and `keys_from`: for a fork that keeps its original's keys (`keepKeys`), the key prefix its
 * commands send under (`run_<original>[:g<n>]`). All nullable (expand only: a release before this one writes runs without them; a catalog
 * change, no index: nothing looks forks up by their original yet). Numbered before the events
 * partitioning, which stays the newest migration (its test and bench/history revert it alone). Rewind in
 * place (`RunRepository.fork` with `inPlace`): the checkpoints a rewind in place takes out
 * of a run's record are kept in `ai_rewound_checkpoints`, by the generation they belonged to (a rewind
 * starts the next one), deleted with their run.
 */
export class RunForks1766997000000 implements MigrationInterface {
  name = 'RunForks1766997000000';
  /** The PostgreSQL schema of the tables (see `durableExecutionMigrations`); unset: unqualified names. */
  schema?: string;

  public async up(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(
      `alter table ${t.runs} add column forked_from uuid, add column fork_step integer, add column keys_from text`,
    );
    await q.query(`
      create table ${t.rewound} (
        run_id      uuid not null references ${t.runs}(id) on delete cascade,
        generation  integer not null,
        step_index  integer not null,
        step_name   text not null,
        output      jsonb not null,
        attempt     integer not null,
        epoch       bigint not null,
        meta        jsonb,
        seq         integer,
        fingerprint text,
        created_at  timestamptz not null,
        rewound_at  timestamptz not null default now(),
        primary key (run_id, generation, step_index)
      )`);
  }

  public async down(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`drop table ${t.rewound}`);
    await q.query(
      `alter table ${t.runs} drop column keys_from, drop column fork_step, drop column forked_from`,
    );
  }
}
