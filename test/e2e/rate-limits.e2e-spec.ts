import { INestApplication } from '@nestjs/common';
import { DurableWorkflow, RunContext, RunRepository } from '../../src';
import { DurableWorker } from '../../src/engine/worker.service';
import { ScheduleRunner } from '../../src/maintenance/schedule-runner.service';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { waitFor } from '../helpers/processes';
import { beginsOverRate } from '../helpers/slot-holds';

@DurableWorkflow('rated', { rateLimit: { limit: 2, periodMs: 1500 } })
class Rated {
  async run(input: { n: number }) {
    return input.n;
  }
}

@DurableWorkflow('rated-key', {
  concurrencyKey: (i: { tenant: string }) => i.tenant,
  rateLimit: { limit: 1, periodMs: 60_000, perKey: true },
})
class RatedKey {
  async run(input: { tenant: string }) {
    return input.tenant;
  }
}

@DurableWorkflow('rated-sleep', { rateLimit: { limit: 1, periodMs: 60_000 } })
class RatedSleep {
  async run(input: { n: number }, ctx: RunContext) {
    await ctx.sleep(30);
    return input.n;
  }
}

/** Rate limits on starts, in one process driven tick by tick (the multi-process proof is in workers-limits). */
describe('rate limits on starts', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let runs: RunRepository;
  let worker: DurableWorker;

  beforeAll(async () => {
    db = await createTestDatabase('rates');
    app = await bootApp(db.url, [Rated, RatedKey, RatedSleep]);
    runs = app.get(RunRepository);
    worker = app.get(DurableWorker);
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  const statuses = async (kind: string) =>
    (
      await db.query(`select status, limited_by from ai_runs where kind = $1 order by created_at`, [kind])
    ).map((r: any) => (r.limited_by ? `held ${r.limited_by}` : r.status));
  const drive = async () => {
    await app.get(ScheduleRunner).tick(); // wakes runs whose tokens are free again
    await worker.tick();
    await worker.idle();
  };

  it('at most `limit` runs begin per period; the others wait out of the claim index, start() is never refused', async () => {
    for (let n = 0; n < 5; n++) await runs.start('rated', { n });
    await drive();
    expect(await statuses('rated')).toEqual([
      'succeeded',
      'succeeded',
      'held {"rate": ["rated"]}',
      'held {"rate": ["rated"]}',
      'held {"rate": ["rated"]}',
    ]);
    // No token is free yet: a run started now does not begin either, and the held runs are not rescanned.
    await runs.start('rated', { n: 5 });
    await drive();
    expect((await statuses('rated')).filter((s) => s === 'succeeded')).toHaveLength(2);
    expect((await statuses('rated')).filter((s) => s.startsWith('held'))).toHaveLength(4);
    await waitFor(
      async () => {
        await drive();
        return (await statuses('rated')).every((s) => s === 'succeeded');
      },
      10_000,
      'every rated run to begin, two per 1.5 s',
    );
    const events = await db.query(
      `select e.created_at, e.payload from ai_events e join ai_runs r on r.id = e.run_id
        where r.kind = 'rated' and e.event_type = 'run.claimed'`,
    );
    expect(events.filter((e: any) => e.payload.rateToken)).toHaveLength(6);
    expect(beginsOverRate(events, 2, 1500)).toEqual([]);
  });

  it('a per-key rate limits each key on its own', async () => {
    for (const tenant of ['A', 'A', 'B']) await runs.start('rated-key', { tenant });
    await drive();
    expect(await statuses('rated-key')).toEqual([
      'succeeded',
      'held {"rate": ["rated-key", "A"]}',
      'succeeded',
    ]);
  });

  it("a run's later claims (after a sleep) take no token: only its first claim begins it", async () => {
    await runs.start('rated-sleep', { n: 1 });
    await runs.start('rated-sleep', { n: 2 });
    await waitFor(
      async () => {
        await drive();
        return (await statuses('rated-sleep'))[0] === 'succeeded';
      },
      10_000,
      'the first run to sleep and finish',
    );
    expect(await statuses('rated-sleep')).toEqual(['succeeded', 'held {"rate": ["rated-sleep"]}']);
  });

  it('refuses a bad rate limit where it is declared, naming the field', () => {
    expect(() => DurableWorkflow('bad', { rateLimit: { limit: 0, periodMs: 1000 } })).toThrow(
      /rateLimit.limit/,
    );
    expect(() => DurableWorkflow('bad', { rateLimit: { limit: 1, periodMs: 0 } })).toThrow(
      /rateLimit.periodMs/,
    );
    expect(() => DurableWorkflow('bad', { rateLimit: { limit: 1, periodMs: 10, perKey: true } })).toThrow(
      /rateLimit.perKey needs concurrencyKey/,
    );
  });
});
