import { Client } from 'pg';
import { runDurableMigrations } from '../../src/migrations';

/** Applies the module schema plus the worker fixture's `step_effects` table on the database at `url`. */
export async function prepareWorkerSchema(url: string): Promise<void> {
  await runDurableMigrations({ type: 'postgres', url });
  const c = new Client({ connectionString: url });
  await c.connect();
  try {
    await c.query(`create table step_effects (
      id bigint generated always as identity primary key, run_id uuid not null, step text not null,
      ref text not null, at text not null, pid int not null, created_at timestamptz not null default clock_timestamp())`);
  } finally {
    await c.end();
  }
}
