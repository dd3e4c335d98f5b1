import { INestApplication, Injectable } from '@nestjs/common';
import {
  DurableCron,
  DurableSchedules,
  DurableWorkflow,
  DurableStep,
  RunRepository,
  ScheduledRunInput,
} from '../../src';
import { DurableAdminModule } from '../../src/admin';
import { DurableWorker } from '../../src/engine/worker.service';
import { DurableUsageError } from '../../src/errors/durable-usage.error';
import { ScheduleNotFoundError } from '../../src/errors/schedule-not-found.error';
import { ScheduleRunner } from '../../src/maintenance/schedule-runner.service';
import { nextTick } from '../../src/util/cron-ticks';
import { ScheduleStore } from '../../src/store/schedules.store';
import { bootApp, bootHttpApp } from '../helpers/app';
import { gate } from '../helpers/drive';
import { createTestDatabase, TestDatabase } from '../helpers/database';

@DurableCron('* * * * * *', { name: 'every-second', input: { region: 'eu' } })
@DurableWorkflow('tick-every')
class EverySecond {
  async run(input: ScheduledRunInput) {
    return input.scheduledAt;
  }
}

@DurableCron('* * * * * *', { name: 'catch-all', catchUp: 'all' })
@DurableWorkflow('tick-all')
class CatchAll {
  async run() {
    return 1;
  }
}

@DurableCron('* * * * * *', { name: 'catch-latest' })
@DurableWorkflow('tick-latest')
class CatchLatest {
  async run() {
    return 1;
  }
}

@DurableCron('0 0 1 1 *', { name: 'catch-skip', catchUp: 'skip', timezone: 'Europe/Berlin' })
@DurableWorkflow('tick-skip')
class CatchSkip {
  async run() {
    return 1;
  }
}

@DurableCron('* * * * * *', { name: 'no-overlap', overlap: 'skip' })
@DurableWorkflow('tick-overlap')
class NoOverlap {
  async run() {
    return 1;
  }
}

@DurableCron('* * * * * *', { name: 'queued', overlap: 'queue', catchUp: 'all' })
@DurableWorkflow('tick-queue')
class Queued {
  async run() {
    return 1;
  }
}

/** Durable cron schedules in one process, its ticks driven by the test (the multi-process proof: workers-schedules). */
describe('@DurableCron schedules', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let runner: ScheduleRunner;
  let schedules: DurableSchedules;
  let runs: RunRepository;

  beforeAll(async () => {
    db = await createTestDatabase('cron');
    // A schedule made at run time below fires every second (limits.minScheduleIntervalMs: 1 minute by default).
    app = await bootApp(db.url, [EverySecond, CatchAll, CatchLatest, CatchSkip, NoOverlap, Queued], {
      limits: { minScheduleIntervalMs: 1000 },
    });
    runner = app.get(ScheduleRunner);
    schedules = app.get(DurableSchedules);
    runs = app.get(RunRepository);
    await runner.tick(); // declares them
    for (const name of ['catch-all', 'catch-latest', 'no-overlap', 'queued']) await schedules.pause(name);
    // On a loaded machine the declaring tick can find the tick it declared already due and fire it (a
    // second passed between the two statements): the runs of the schedules the tests drive start at 0.
    await db.query(`delete from ai_runs where kind = any($1)`, [
      ['tick-all', 'tick-latest', 'tick-overlap', 'tick-queue'],
    ]);
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  const runsOf = (kind: string) =>
    db.query(`select idempotency_key, input from ai_runs where kind = $1 order by idempotency_key`, [kind]);
  /** Moves a schedule's next tick `seconds` before the database's now, on a whole second. */
  const missSince = (name: string, seconds: number) =>
    db.query(
      `update ai_schedules set next_at = date_trunc('second', now()) - make_interval(secs => $2), paused = false where name = $1`,
      [name, seconds],
    );

  it('declares each schedule with its next tick, by the database clock', async () => {
    const list = await schedules.list();
    expect(list.map((s) => s.name)).toEqual([
      'catch-all',
      'catch-latest',
      'catch-skip',
      'every-second',
      'no-overlap',
      'queued',
    ]);
    const every = list.find((s) => s.name === 'every-second')!;
    const now = (await db.query(`select now() as now`))[0].now as Date;
    expect(every).toMatchObject({ kind: 'tick-every', cron: '* * * * * *', timezone: 'UTC', paused: false });
    expect(every.nextAt.getTime() - now.getTime()).toBeLessThanOrEqual(1000);
    // New Year in Berlin, in UTC.
    expect(list.find((s) => s.name === 'catch-skip')!.nextAt).toEqual(
      nextTick('0 0 1 1 *', 'Europe/Berlin', now),
    );
  });

  it('every tick starts one run, keyed by its tick, with the schedule in its input and trail', async () => {
    const t0 = Date.now();
    while (Date.now() - t0 < 3300) {
      await runner.tick();
      await new Promise((r) => setTimeout(r, 150));
    }
    const fired = await runsOf('tick-every');
    expect(fired.length).toBeGreaterThanOrEqual(3);
    expect(fired.length).toBeLessThanOrEqual(5);
    const ticks = fired
      .map((r: any) => Date.parse(r.input.scheduledAt))
      .sort((a: number, b: number) => a - b);
    for (let i = 1; i < ticks.length; i++) expect(ticks[i] - ticks[i - 1]).toBe(1000); // none missed
    for (const r of fired) {
      expect(r.idempotency_key).toBe(`cron:every-second:${r.input.scheduledAt}`);
      expect(r.input).toMatchObject({ region: 'eu', schedule: 'every-second' });
    }
    const created = await db.query(
      `select e.payload from ai_events e join ai_runs r on r.id = e.run_id
        where r.kind = 'tick-every' and e.event_type = 'run.created' limit 1`,
    );
    expect(created[0].payload).toMatchObject({ kind: 'tick-every', schedule: 'every-second' });
    const every = (await schedules.list()).find((s) => s.name === 'every-second')!;
    expect(every.lastRunKey).toBe(
      fired
        .map((r: any) => r.idempotency_key)
        .sort()
        .at(-1),
    );
  });

  it("catchUp 'all' starts a run for every missed tick, 'latest' one, 'skip' none past a minute", async () => {
    await missSince('catch-all', 5);
    await missSince('catch-latest', 5);
    await db.query(`update ai_schedules set next_at = '2026-01-01T00:00:00+01' where name = 'catch-skip'`);
    await runner.tick();
    expect((await runsOf('tick-all')).length).toBeGreaterThanOrEqual(6); // -5 s … now
    expect((await runsOf('tick-latest')).length).toBe(1);
    expect(await runsOf('tick-skip')).toEqual([]);
    const skip = (await schedules.list()).find((s) => s.name === 'catch-skip')!;
    const now = (await db.query(`select now() as now`))[0].now as Date;
    expect(skip.nextAt).toEqual(nextTick('0 0 1 1 *', 'Europe/Berlin', now));
    for (const name of ['catch-all', 'catch-latest']) await schedules.pause(name);
  });

  it("overlap 'skip': no run while the last one has not ended", async () => {
    await missSince('no-overlap', 0);
    await runner.tick();
    expect(await runsOf('tick-overlap')).toHaveLength(1); // pending: no worker here
    await missSince('no-overlap', 0);
    await runner.tick();
    expect(await runsOf('tick-overlap')).toHaveLength(1);
    const { idempotency_key } = (await runsOf('tick-overlap'))[0];
    const [run] = (await runs.list({ kind: 'tick-overlap' })).items;
    await runs.cancel(run.id);
    await new Promise((r) => setTimeout(r, 1100)); // a tick of its own (the first one's second is taken)
    await missSince('no-overlap', 0);
    await runner.tick();
    const after = await runsOf('tick-overlap');
    expect(after).toHaveLength(2);
    expect(after.map((r: any) => r.idempotency_key)).toContain(idempotency_key);
  });

  it("overlap 'queue': each tick waits for the previous run to end, then starts, in tick order", async () => {
    await missSince('queued', 2); // three ticks due: now - 2 s, now - 1 s, now
    await runner.tick();
    const first = await runsOf('tick-queue');
    expect(first).toHaveLength(1); // only the oldest tick: the others wait their turn
    await runner.tick();
    expect(await runsOf('tick-queue')).toHaveLength(1); // the first run has not ended
    const ticks: number[] = [];
    for (let n = 2; n <= 3; n++) {
      const live = (await runs.list({ kind: 'tick-queue', status: 'pending' })).items;
      expect(live).toHaveLength(1);
      await runs.cancel(live[0].id);
      await runner.tick();
      expect(await runsOf('tick-queue')).toHaveLength(n);
    }
    for (const r of await runsOf('tick-queue')) ticks.push(Date.parse(r.input.scheduledAt));
    ticks.sort((a, b) => a - b);
    expect([ticks[1] - ticks[0], ticks[2] - ticks[1]]).toEqual([1000, 1000]); // consecutive ticks, none lost
    await schedules.pause('queued');
  });

  it('pause stops the ticks; resume fires from the next tick after now, not the missed ones', async () => {
    const paused = await schedules.pause('every-second');
    expect(paused.paused).toBe(true);
    const before = (await runsOf('tick-every')).length;
    await new Promise((r) => setTimeout(r, 1200));
    await runner.tick();
    expect(await runsOf('tick-every')).toHaveLength(before);
    const resumed = await schedules.resume('every-second');
    expect(resumed.paused).toBe(false);
    expect(resumed.nextAt.getTime()).toBeGreaterThan(Date.now() - 1000);
    await runner.tick();
    expect((await runsOf('tick-every')).length).toBeLessThanOrEqual(before + 1);
    await expect(schedules.pause('nope')).rejects.toThrow(ScheduleNotFoundError);
  });

  it('a schedule created at run time fires like a declared one, and only it can be removed', async () => {
    const made = await schedules.create('made-at-runtime', 'tick-api', '* * * * * *', {
      input: { from: 'api' },
    });
    expect(made).toMatchObject({ name: 'made-at-runtime', kind: 'tick-api', source: 'api', paused: false });
    // A process that declares its code's schedules for that kind does not forget it.
    await app.get(ScheduleStore).declare(['tick-api'], []);
    const t0 = Date.now();
    while (Date.now() - t0 < 1300) {
      await runner.tick();
      await new Promise((r) => setTimeout(r, 150));
    }
    const fired = await runsOf('tick-api');
    expect(fired.length).toBeGreaterThanOrEqual(1);
    expect(fired[0].input).toMatchObject({ from: 'api', schedule: 'made-at-runtime' });
    await expect(schedules.create('every-second', 'tick-api', '* * * * *')).rejects.toThrow(
      /@DurableCron schedule/,
    );
    await expect(schedules.create('x', 'tick-api', 'nope')).rejects.toThrow(/^cron is not a cron expression/);
    await expect(schedules.remove('every-second')).rejects.toThrow(/pause it instead/);
    await schedules.remove('made-at-runtime');
    await expect(schedules.remove('made-at-runtime')).rejects.toThrow(ScheduleNotFoundError);
    expect((await schedules.list()).map((s) => s.name)).not.toContain('made-at-runtime');
  });

  it('refuses a bad schedule where it is declared, naming the field', () => {
    expect(() => DurableCron('not a cron')).toThrow(DurableUsageError);
    expect(() => DurableCron('* * * * *', { timezone: 'Mars/Base' })).toThrow(/timezone must be an IANA/);
    expect(() => DurableCron('* * * * *', { catchUp: 'some' as never })).toThrow(/catchUp must be/);
    expect(() => DurableCron('* * * * *', { overlap: 'wait' as never })).toThrow(/overlap must be/);
    expect(() => DurableCron('* * * * *', { input: [] as never })).toThrow(/input must be a JSON object/);
  });
});

const pageHold = gate();

@Injectable()
class PageSteps {
  @DurableStep()
  async hold() {
    await pageHold.promise;
    return 1;
  }
}

@DurableWorkflow('page-limited', { concurrency: 1 })
class PageLimited {
  constructor(private readonly s: PageSteps) {}
  async run() {
    return this.s.hold(); // running (holding the slot) until the test ends
  }
}

/** An admin action: JSON only (the admin refuses other content types: no form post can forge one). */
const POST_JSON = { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' };

describe('the schedules in the admin API', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let http: string;

  beforeAll(async () => {
    db = await createTestDatabase('cron_admin');
    ({ app, http } = await bootHttpApp(db.url, {
      imports: [DurableAdminModule.forRoot({ allowAnonymous: true })],
      providers: [CatchSkip, PageSteps, PageLimited],
    }));
    await app.get(ScheduleRunner).tick();
  });
  afterAll(async () => {
    pageHold.open();
    await app?.get(DurableWorker).idle();
    await app?.close();
    await db?.drop();
  });

  it('lists them with their next tick, pauses and resumes one, 404 for an unknown name', async () => {
    const list = await (await fetch(`${http}/durable/api/schedules`)).json();
    expect(list).toEqual([
      expect.objectContaining({
        name: 'catch-skip',
        kind: 'tick-skip',
        paused: false,
        nextAt: expect.any(String),
      }),
    ]);
    const paused = await fetch(`${http}/durable/api/schedules/catch-skip/pause`, POST_JSON);
    expect(paused.status).toBe(200);
    expect(await paused.json()).toMatchObject({ name: 'catch-skip', paused: true });
    const resumed = await (await fetch(`${http}/durable/api/schedules/catch-skip/resume`, POST_JSON)).json();
    expect(resumed).toMatchObject({ paused: false });
    const missing = await fetch(`${http}/durable/api/schedules/nope/pause`, POST_JSON);
    expect(missing.status).toBe(404);
    expect(await missing.json()).toMatchObject({ code: 'DURABLE_SCHEDULE_NOT_FOUND' });
  });

  it("creates a schedule at run time and removes it; refuses bad bodies and the code's schedules", async () => {
    const body = {
      name: 'api-made',
      kind: 'tick-skip',
      cron: '0 3 * * *',
      timezone: 'Europe/Berlin',
      overlap: 'queue',
    };
    const post = (b: unknown) =>
      fetch(`${http}/durable/api/schedules`, { ...POST_JSON, body: JSON.stringify(b) });
    const created = await post(body);
    expect(created.status).toBe(201);
    expect(await created.json()).toMatchObject({
      name: 'api-made',
      kind: 'tick-skip',
      source: 'api',
      overlap: 'queue',
    });
    expect((await post({ ...body, cron: 'nope' })).status).toBe(400);
    expect((await post({ ...body, overlap: 'sometimes' })).status).toBe(400);
    expect((await post({ ...body, name: 'catch-skip' })).status).toBe(400); // the code's name
    const del = (name: string) =>
      fetch(`${http}/durable/api/schedules/${name}`, { ...POST_JSON, method: 'DELETE' });
    expect((await del('catch-skip')).status).toBe(400); // the code's: pause it instead
    expect((await del('api-made')).status).toBe(204);
    expect((await del('api-made')).status).toBe(404);
    const list = (await (await fetch(`${http}/durable/api/schedules`)).json()) as Array<{ name: string }>;
    const names = list.map((s) => s.name);
    expect(names).toEqual(['catch-skip']);
  });

  it('the inspector lists the schedules with their ticks, and the runs held back by a limit', async () => {
    const runs = app.get(RunRepository);
    for (let i = 0; i < 3; i++) await runs.start('page-limited', { i });
    await app.get(DurableWorker).tick(); // one claimed (held in its step), two held back
    const page = await (await fetch(`${http}/durable`)).text();
    expect(page).toContain('data-testid="schedule-row"');
    expect(page).toContain('catch-skip');
    expect(page).toMatch(
      /held back by the limit \[&quot;page-limited&quot;\]|held back by the limit \["page-limited"\]/,
    );
  });
});
