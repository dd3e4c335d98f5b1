import { INestApplication } from '@nestjs/common';
import { Client } from 'pg';
import { RunRepository, WorkflowClass } from '../../src';
import { DurableWorker } from '../../src/engine/worker.service';
import type { Fence } from '../../src/store/run-state/fence';
import type { RunStateStore } from '../../src/store/run-state/run-state.store';
import type { TestDatabase } from './database';
import { waitFor } from './processes';

/** Row locks held by transactions of their own (a write queued behind them waits), ended by the test. */
export class RowLocks {
  private readonly clients: Client[] = [];

  constructor(private readonly url: string) {}

  /** Holds `runId`'s row lock until the returned function commits (or rolls back) its transaction. */
  async lock(runId: string): Promise<(how?: 'commit' | 'rollback') => Promise<void>> {
    const c = new Client({ connectionString: this.url });
    this.clients.push(c);
    await c.connect();
    await c.query('begin');
    await c.query(`select 1 from ai_runs where id = $1 for update`, [runId]);
    return async (how = 'commit') => void (await c.query(how));
  }

  /** Closes every connection (afterEach). */
  async endAll(): Promise<void> {
    await Promise.all(this.clients.splice(0).map((c) => c.end().catch(() => undefined)));
  }
}

/**
 * Inserts `insert` runs of `kind` (no worker serves it, or the test drives it by hand) and claims up
 * to `n` of them for worker `w1` through the store: their fences.
 */
export async function claimInserted(
  db: TestDatabase,
  store: RunStateStore,
  kind: string,
  n: number,
  insert = n,
  limited = false,
): Promise<Fence[]> {
  await db.query(`insert into ai_runs (kind, input) select $1, '{}'::jsonb from generate_series(1, $2)`, [
    kind,
    insert,
  ]);
  const { runs } = await store.claim('w1', [kind], n, [], limited);
  return runs.map((r) => ({ runId: r.id, workerId: 'w1', epoch: r.epoch, timeline: r.timeline }));
}

/** Starts `n` runs of `workflow` at once and ticks the worker until every one has succeeded: their ids. */
export async function startAllAndDrive(
  app: INestApplication,
  db: TestDatabase,
  workflow: WorkflowClass,
  n: number,
): Promise<string[]> {
  const runs = app.get(RunRepository);
  const worker = app.get(DurableWorker);
  const ids = await Promise.all(
    Array.from({ length: n }, async () => (await runs.start(workflow, {})).run.id),
  );
  await waitFor(
    async () => {
      await worker.tick();
      await worker.idle();
      const [r] = await db.query(
        `select count(*)::int as n from ai_runs where id = any($1::uuid[]) and status = 'succeeded'`,
        [ids],
      );
      return r.n === ids.length;
    },
    60_000,
    `the ${n} runs to succeed`,
  );
  return ids;
}
