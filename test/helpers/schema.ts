import { runDurableMigrations } from '../../src';
import { TestDatabase } from './database';

/** Applies the module schema plus the crash fixture's `step_effects` table. */
export async function prepareWorkerSchema(db: TestDatabase): Promise<void> {
  await runDurableMigrations({ type: 'postgres', url: db.url });
  await db.query(`create table step_effects (
    id bigint generated always as identity primary key, run_id uuid not null, step text not null,
    ref text not null, at text not null, pid int not null, created_at timestamptz not null default clock_timestamp())`);
}
