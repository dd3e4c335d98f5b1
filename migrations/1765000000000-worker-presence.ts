import { MigrationInterface, QueryRunner } from 'typeorm';
import { durableNames } from '../src/store/durable-names';

/**
 * Which kinds the live workers serve: one row per worker process, written when it starts and renewed
 * on `worker.presenceIntervalMs` (an idle worker sends no lease heartbeat), removed when it shuts down.
 * A row whose `expires_at` passed belongs to a worker that died without saying so. Read by `start()` in
 * producer-only processes and by the operator's numbers (due runs no live worker serves).
 */
export class WorkerPresence1765000000000 implements MigrationInterface {
  name = 'WorkerPresence1765000000000';
  /** The PostgreSQL schema of the tables (see `durableExecutionMigrations`); unset: unqualified names. */
  schema?: string;

  public async up(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`
      create table ${t.workers} (
        worker_id  text primary key check (length(worker_id) between 1 and 200),
        kinds      text[] not null,
        started_at timestamptz not null default now(),
        seen_at    timestamptz not null default now(),
        expires_at timestamptz not null
      )`);
  }

  public async down(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`drop table ${t.workers}`);
  }
}
