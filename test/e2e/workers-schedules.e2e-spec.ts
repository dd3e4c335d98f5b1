import { INestApplication } from '@nestjs/common';
import { DurableSchedules } from '../../src';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { spawnWorker, waitFor, WorkerProcess } from '../helpers/processes';
import { prepareWorkerSchema } from '../helpers/schema';

/**
 * Issue 21's done-when for schedules: 3 worker processes fire a per-second `@DurableCron` schedule
 * (catchUp 'all'), one SIGKILLed mid-way; every tick from the first to the last gave exactly one run.
 */
describe('a durable cron schedule fired by 3 worker processes, one SIGKILLed', () => {
  let db: TestDatabase;
  let app: INestApplication;
  const workers: WorkerProcess[] = [];

  beforeAll(async () => {
    db = await createTestDatabase('cron_procs');
    await prepareWorkerSchema(db.url);
    app = await bootApp(db.url);
  });
  afterAll(async () => {
    for (const w of workers) w.child.kill('SIGKILL');
    await Promise.all(workers.map((w) => w.exited));
    await app?.close();
    await db?.drop();
  });

  const ticks = async (): Promise<number[]> =>
    (await db.query(`select input->>'scheduledAt' as at from ai_runs where kind = 'cron-tick'`))
      .map((r: any) => Date.parse(r.at))
      .sort((a: number, b: number) => a - b);

  it('each tick gives exactly one run, none missed, across the kill', async () => {
    for (let i = 0; i < 3; i++)
      workers.push(spawnWorker({ DB_URL: db.url, CRON: '1', WORKER_ID: `cron-w${i}` }));
    await Promise.all(workers.map((w) => w.ready));
    await waitFor(async () => (await ticks()).length >= 4, 20_000, '4 ticks');
    workers[0].child.kill('SIGKILL');
    await waitFor(async () => (await ticks()).length >= 11, 30_000, '11 ticks');
    await app.get(DurableSchedules).pause('procs-tick');
    const fired = await ticks();
    expect(fired.length).toBeGreaterThanOrEqual(11);
    for (let i = 1; i < fired.length; i++) expect(fired[i] - fired[i - 1]).toBe(1000); // one run per tick
    const keys = await db.query(
      `select count(distinct idempotency_key)::int as n from ai_runs where kind = 'cron-tick'`,
    );
    expect(keys[0].n).toBe(fired.length);
    // The surviving workers run them all (the killed one's runs come back with its expired leases).
    await waitFor(
      async () =>
        (
          await db.query(
            `select count(*)::int as n from ai_runs where kind = 'cron-tick' and status <> 'succeeded'`,
          )
        )[0].n === 0,
      30_000,
      'every scheduled run to succeed',
    );
    console.log(
      `schedules across processes: ${fired.length} ticks, ${fired.length} runs, one worker SIGKILLed`,
    );
  });
});
