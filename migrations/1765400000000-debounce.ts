import { MigrationInterface, QueryRunner } from 'typeorm';
import { durableNames } from '../src/store/durable-names';

/**
 * Debounced starts (`@DurableWorkflow(kind, { debounce: { periodMs, key } })`): `ai_runs.debounce_key`,
 * and a unique index on (kind, debounce_key) over the runs that have not begun (pending, epoch 0). A
 * start of a debounced kind inserts into it, or, on conflict, replaces the waiting run's input and moves
 * it `periodMs` later: a burst of starts for a key becomes one run, with the last input.
 */
export class Debounce1765400000000 implements MigrationInterface {
  name = 'Debounce1765400000000';
  /** The PostgreSQL schema of the tables (see `durableExecutionMigrations`); unset: unqualified names. */
  schema?: string;

  public async up(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`alter table ${t.runs} add column debounce_key text check (length(debounce_key) <= 200)`);
    await q.query(`
      create unique index ai_runs_debounce_idx on ${t.runs} (kind, debounce_key)
        where debounce_key is not null and status = 'pending' and epoch = 0`);
  }

  public async down(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`drop index ${t.prefix}ai_runs_debounce_idx`);
    await q.query(`alter table ${t.runs} drop column debounce_key`);
  }
}
