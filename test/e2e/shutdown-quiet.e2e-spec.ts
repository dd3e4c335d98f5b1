import { Client } from 'pg';
import { bootModules, durableModule } from '../helpers/app';
import { CapturingLogger } from '../helpers/capturing-logger';
import { createTestDatabase, TestDatabase } from '../helpers/database';

/**
 * A clean shutdown is quiet: the reconciler's sweep and the schedule tick that are in flight when the
 * app closes end before the module's pool does. Before, the pool ended while they ran (the shutdown
 * hooks of one phase run together), and the tick's next statement logged
 * `reconciler sweep failed (will retry): Cannot use a pool after calling end on the pool`.
 */
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
    const locker = new Client({ connectionString: db.url });
    await locker.connect();
    await locker.query('begin');
    await locker.query('lock table ai_runs in access exclusive mode');
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
    await locker.query('rollback');
    await locker.end();
    await closing;

    expect(logger.lines.filter((l) => l.level === 'warn' || l.level === 'error')).toEqual([]);
  });
});
