import { Injectable } from '@nestjs/common';
import { Client } from 'pg';
import { DurableStep, DurableWorkflow, RunRepository } from '../../src';
import { DurableWorker } from '../../src/engine/worker.service';
import { bootModules, durableModule } from '../helpers/app';
import { CapturingLogger } from '../helpers/capturing-logger';
import { createTestDatabase, TestDatabase } from '../helpers/database';

/**
 * A clean shutdown is quiet: the reconciler's sweep and the schedule tick that are in flight when the
 * app closes end before the module's pool does. Before, the pool ended while they ran (the shutdown
 * hooks of one phase run together), and the tick's next statement logged
 * `reconciler sweep failed (will retry): Cannot use a pool after calling end on the pool`.
 */
@Injectable()
class QuietSteps {
  @DurableStep({ name: 'one' })
  async one() {
    return 1;
  }
}

@DurableWorkflow('quiet-one')
class QuietOne {
  constructor(private readonly s: QuietSteps) {}
  async run() {
    return this.s.one();
  }
}

/** Holds every statement on ai_runs until the returned function ends the lock's transaction. */
async function lockRuns(db: TestDatabase): Promise<() => Promise<void>> {
  const locker = new Client({ connectionString: db.url });
  await locker.connect();
  await locker.query('begin');
  await locker.query('lock table ai_runs in access exclusive mode');
  return async () => {
    await locker.query('rollback');
    await locker.end();
  };
}

describe('shutdown with a maintenance tick in flight', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase('shutdown_quiet');
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('waits for the in-flight sweep and schedule tick before ending the pool, and logs nothing', async () => {
    const logger = new CapturingLogger();
    const app = await bootModules(
      { imports: [durableModule(db.url, { reconciler: { enabled: true, intervalMs: 10 } })] },
      logger,
    );
    // Hold every statement on ai_runs: the next sweep (and schedule tick) starts and blocks in it.
    const unlock = await lockRuns(db);
    const waiting = async () =>
      (
        await db.query<{ n: number }>(
          `select count(*)::int as n from pg_stat_activity
            where datname = current_database() and wait_event_type = 'Lock'`,
        )
      )[0].n;
    for (let i = 0; i < 100 && (await waiting()) === 0; i++) await new Promise((r) => setTimeout(r, 20));
    expect(await waiting()).toBeGreaterThan(0);

    const closing = app.close();
    await new Promise((r) => setTimeout(r, 300));
    await unlock();
    await closing;

    expect(logger.lines.filter((l) => l.level === 'warn' || l.level === 'error')).toEqual([]);
  });

  it('a claim under way when the drain begins: its run is handed back before the pool ends', async () => {
    const logger = new CapturingLogger();
    const app = await bootModules(
      {
        imports: [durableModule(db.url, { reconciler: { enabled: false } })],
        providers: [QuietSteps, QuietOne],
      },
      logger,
    );
    const { run } = await app.get(RunRepository).start(QuietOne, {});
    const unlock = await lockRuns(db);
    const claimed = app.get(DurableWorker).tick(); // blocks in the claim statement
    await new Promise((r) => setTimeout(r, 200));
    const closing = app.close(); // the drain begins while the claim is under way
    await new Promise((r) => setTimeout(r, 300));
    await unlock();
    expect(await claimed).toBe(1);
    await closing;

    // Before: the drain saw nothing in flight, the pool ended, and the claimed run's release logged
    // `could not record run.released ...: Cannot use a pool after calling end on the pool`, leaving
    // it `running` until its lease ran out. (The test drives the worker by hand: no presence row, so
    // start() warns that no live worker serves the kind.)
    const unserved = (m: string) => m.startsWith("starting runs of kind 'quiet-one', which no live worker");
    expect(
      logger.lines.filter((l) => l.level === 'error' || (l.level === 'warn' && !unserved(l.message))),
    ).toEqual([]);
    const [row] = await db.query(
      `select status, worker_id from ai_runs where id = $1 and available_at <= now()`,
      [run.id],
    );
    expect(row).toEqual({ status: 'waiting', worker_id: null }); // handed back, due at once
    const events = await db.query(`select event_type from ai_events where run_id = $1 order by id`, [run.id]);
    expect(events.map((e: { event_type: string }) => e.event_type)).toEqual([
      'run.created',
      'run.claimed',
      'run.released',
    ]);
  });
});
