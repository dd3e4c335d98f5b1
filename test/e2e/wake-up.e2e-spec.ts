import { INestApplication, Injectable } from '@nestjs/common';
import { DurableStep, DurableWorkflow, RunRepository } from '../../src';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { waitFor } from '../helpers/processes';

@Injectable()
class Echo {
  @DurableStep()
  async echo(v: number) {
    return v;
  }
}

@DurableWorkflow('wake')
class WakeWorkflow {
  constructor(private readonly e: Echo) {}
  async run(input: { v: number }) {
    return this.e.echo(input.v);
  }
}

/** The worker on its real schedule, with a poll interval so long that only NOTIFY can explain a quick pickup. */
describe('LISTEN/NOTIFY wake-up on the real schedule', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let runs: RunRepository;

  beforeAll(async () => {
    db = await createTestDatabase('wake');
    app = await bootApp(db.url, [Echo, WakeWorkflow], {
      worker: { enabled: true, pollIntervalMs: 60_000, heartbeatMs: 1000, leaseTtlMs: 5000 },
    });
    runs = app.get(RunRepository);
    await new Promise((r) => setTimeout(r, 300)); // the listener connects
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  const pickupMs = async (v: number): Promise<number> => {
    const t0 = Date.now();
    const { run } = await runs.start('wake', { v });
    await waitFor(async () => (await runs.get(run.id))!.status === 'succeeded', 10_000, 'the run to finish');
    return Date.now() - t0;
  };

  it('an idle worker picks a new run up at once, not at the next poll', async () => {
    const ms = await pickupMs(1);
    console.log(`start → succeeded via NOTIFY: ${ms} ms (poll interval 60000 ms)`);
    expect(ms).toBeLessThan(2000);
  });

  it('after its connections are killed (pg_terminate_backend) the worker reconnects and is woken again', async () => {
    const killed = await db.query(
      `select count(pg_terminate_backend(pid))::int as n from pg_stat_activity
        where datname = current_database() and pid <> pg_backend_pid()`,
    );
    expect(killed[0].n).toBeGreaterThan(0);
    await new Promise((r) => setTimeout(r, 1000)); // listener reconnect back-off starts at 250 ms
    const ms = await pickupMs(2);
    console.log(`pickup after pg_terminate_backend: ${ms} ms`);
    expect(ms).toBeLessThan(3000);
    const again = await pickupMs(3);
    expect(again).toBeLessThan(2000);
  });
});

/**
 * A claim skips a row that is locked (SKIP LOCKED). `result()` marks the run it waits for (a row lock
 * for a moment): a claim woken by the start's NOTIFY in that moment finds nothing, and with a long poll
 * the run waited for the next one (the schema test's "wakes a's idle worker at once" failed this way
 * under load). The mark wakes the workers again when it commits.
 */
describe('a waiter marking a due run wakes the workers again', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let listener: import('pg').Client;
  const heard: string[] = [];

  beforeAll(async () => {
    db = await createTestDatabase('wake_mark');
    app = await bootApp(db.url, [Echo, WakeWorkflow]); // no worker: the test counts the wake-ups
    const { Client } = await import('pg');
    listener = new Client({ connectionString: db.url });
    await listener.connect();
    await listener.query('listen durable_execution_wake');
    listener.on('notification', (n) => heard.push(String(n.payload)));
  });
  afterAll(async () => {
    await listener?.end();
    await app?.close();
    await db?.drop();
  });

  it('a pending run: the start wakes once, the first result() once more, later ones not', async () => {
    const runs = app.get(RunRepository);
    const { run } = await runs.start('wake', { v: 1 });
    await waitFor(async () => heard.length === 1, 2000, 'the start to wake');
    await runs.result(run.id, { timeoutMs: 50 }).catch(() => undefined);
    await waitFor(async () => heard.length === 2, 2000, 'the mark to wake again');
    await runs.result(run.id, { timeoutMs: 50 }).catch(() => undefined);
    await new Promise((r) => setTimeout(r, 200));
    expect(heard).toEqual(['wake', 'wake']);
  });
});
