import { INestApplication, Injectable } from '@nestjs/common';
import {
  DurableCron,
  DurableSchedules,
  DurableStep,
  DurableWorkflow,
  InvalidArgumentError,
  RunRepository,
  ScheduledRunInput,
  ScheduleNotFoundError,
} from '../../src';
import { advanceTestClock, driveRun, fireSchedule, resetTestClock } from '../../src/testing';
import { DurableWorker } from '../../src/engine/worker.service';
import { ScheduleRunner } from '../../src/maintenance/schedule-runner.service';
import { nextTick } from '../../src/util/cron-ticks';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';

/**
 * Issue 36, section 3: the test kit drives budgets and schedules too. `advanceTestClock` (and `driveRun`
 * where it skips a run's wait) moves model-budget windows, so a run parked over budget resumes without
 * real waiting; `fireSchedule` fires a schedule now, the run its next tick would start.
 */

const HOUR = 3600_000;
const DAY = 24 * HOUR;

@Injectable()
class Model {
  @DurableStep({ name: 'ask', kind: 'model', budget: 'hourly' })
  async ask(q: string) {
    return { answer: q, usage: { total_tokens: 5 } };
  }
}

@DurableWorkflow('kit-budgeted')
class Budgeted {
  constructor(private readonly model: Model) {}
  async run(input: { q: string }) {
    return this.model.ask(input.q);
  }
}

@DurableCron('0 2 * * *', { name: 'kit-nightly', input: { region: 'eu' } })
@DurableWorkflow('kit-nightly')
class Nightly {
  async run(input: ScheduledRunInput & { region: string }) {
    return { region: input.region, scheduledAt: input.scheduledAt };
  }
}

@DurableCron('0 4 * * *', { name: 'kit-daily' })
@DurableWorkflow('kit-daily')
class Daily {
  async run(input: ScheduledRunInput) {
    return input.scheduledAt;
  }
}

@DurableCron('* * * * * *', { name: 'kit-second', catchUp: 'all' })
@DurableWorkflow('kit-second')
class EverySecond {
  async run() {
    return 1;
  }
}

describe('the test kit: budget windows follow the test clock; fireSchedule', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let runs: RunRepository;
  const tick = async () => {
    const worker = app.get(DurableWorker);
    await worker.tick();
    await worker.idle();
  };
  const overBudget = 'over model budget "hourly"';

  beforeAll(async () => {
    db = await createTestDatabase('test_kit_time');
    app = await bootApp(db.url, [Model, Budgeted, Nightly, Daily, EverySecond], {
      budgets: { hourly: { requests: 1, periodMs: HOUR } },
    });
    runs = app.get(RunRepository);
    await app.get(ScheduleRunner).declareOnce();
    await app.get(DurableSchedules).pause('kit-second'); // resumed by its own case only
  });
  afterEach(() => resetTestClock());
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('advanceTestClock moves model-budget windows: a run parked over budget resumes, no real wait', async () => {
    const t0 = Date.now();
    const first = (await runs.start(Budgeted, { q: 'a' })).run.id;
    expect((await driveRun(app, first, ['succeeded'], 3)).output).toMatchObject({ answer: 'a' });
    const second = (await runs.start(Budgeted, { q: 'b' })).run.id;
    const parked = await driveRun(app, second, ['waiting'], 3);
    expect(parked.parkedReason).toBe(overBudget); // the hour's one call is taken
    await tick();
    expect((await runs.get(second))!.status).toBe('waiting'); // not due before the clock moves
    await advanceTestClock(app, HOUR);
    await tick(); // a plain tick: the run is due and its call fits the window now
    expect(await runs.get(second)).toMatchObject({ status: 'succeeded', output: { answer: 'b' } });
    // The calls moved with the clock: the window ending now holds the second call only.
    const inWindow = await db.query(
      `select count(*)::int as n from ai_budget_use where budget = 'hourly' and at > now() - interval '1 hour'`,
    );
    expect(inWindow[0].n).toBe(1);
    expect(Date.now() - t0).toBeLessThan(10_000);
  });

  it("driveRun skips a budget wait with the budget's window: the parked run succeeds in a few ticks", async () => {
    const id = (await runs.start(Budgeted, { q: 'c' })).run.id;
    expect((await driveRun(app, id, ['waiting'], 3)).parkedReason).toBe(overBudget);
    expect(await driveRun(app, id, ['succeeded', 'failed'], 3)).toMatchObject({
      status: 'succeeded',
      output: { answer: 'c' },
    });
  });

  it("fireSchedule starts the run the schedule's next tick would, and the schedule waits for the tick after", async () => {
    const before = (await app.get(DurableSchedules).list()).find((s) => s.name === 'kit-nightly')!;
    const [id, ...more] = await fireSchedule(app, 'kit-nightly');
    expect(more).toEqual([]);
    const [row] = await db.query(`select kind, idempotency_key, input from ai_runs where id = $1`, [id]);
    const tick = row.input.scheduledAt as string;
    expect(tick).toBe(before.nextAt.toISOString()); // its next tick, fired early
    expect(row).toEqual({
      kind: 'kit-nightly',
      idempotency_key: `cron:kit-nightly:${tick}`,
      input: { region: 'eu', schedule: 'kit-nightly', scheduledAt: tick },
    });
    const after = (await app.get(DurableSchedules).list()).find((s) => s.name === 'kit-nightly')!;
    expect(after.lastAt!.toISOString()).toBe(tick);
    expect(after.nextAt).toEqual(nextTick('0 2 * * *', 'UTC', new Date(tick)));
    expect((await driveRun(app, id)).output).toEqual({ region: 'eu', scheduledAt: tick });
    // Fired again: the tick after, neither the same nor a later one.
    const [next] = await fireSchedule(app, 'kit-nightly');
    const [nextRow] = await db.query(`select input from ai_runs where id = $1`, [next]);
    expect(nextRow.input.scheduledAt).toBe(after.nextAt.toISOString());
  });

  it('firing early neither skips nor doubles the regular ticks that follow', async () => {
    const runner = app.get(ScheduleRunner);
    const schedules = app.get(DurableSchedules);
    await schedules.resume('kit-second'); // from its next tick after now: nothing missed so far
    try {
      await db.query(`delete from ai_runs where kind = 'kit-second'`);
      const early = [...(await fireSchedule(app, 'kit-second')), ...(await fireSchedule(app, 'kit-second'))];
      expect(early.length).toBeGreaterThanOrEqual(2); // one each (more on a machine slow enough to miss a tick)
      // Until the tick after those fired early has passed (on the database's clock), then the regular firing.
      const next = (await schedules.list()).find((x) => x.name === 'kit-second')!.nextAt.getTime();
      const dbNow = ((await db.query(`select now() as now`))[0].now as Date).getTime();
      await new Promise((r) => setTimeout(r, Math.max(0, next - dbNow) + 300));
      await runner.tick();
      const keys = (
        await db.query(`select idempotency_key from ai_runs where kind = 'kit-second' order by 1`)
      ).map((r: { idempotency_key: string }) =>
        Date.parse(r.idempotency_key.slice('cron:kit-second:'.length)),
      );
      expect(keys.length).toBeGreaterThanOrEqual(3);
      for (let i = 1; i < keys.length; i++) expect(keys[i] - keys[i - 1]).toBe(1000);
    } finally {
      await schedules.pause('kit-second'); // a schedule every second must not run into the next cases
    }
  });

  it('advanceTestClock fires the schedules whose ticks it passes; after a reset they follow the wall clock again', async () => {
    const daily = async () =>
      (await db.query(`select idempotency_key, input from ai_runs where kind = 'kit-daily' order by 1`)).map(
        (r: { idempotency_key: string; input: { scheduledAt: string } }) => [
          r.idempotency_key,
          r.input.scheduledAt,
        ],
      );
    const now = (await db.query(`select now() as now`))[0].now as Date;
    const t1 = nextTick('0 4 * * *', 'UTC', now).toISOString();
    const t2 = new Date(Date.parse(t1) + DAY).toISOString();
    await advanceTestClock(app, DAY);
    expect(await daily()).toEqual([[`cron:kit-daily:${t1}`, t1]]); // the tick the day passed, once
    await advanceTestClock(app, 0);
    expect(await daily()).toHaveLength(1); // nothing passed since
    await advanceTestClock(app, DAY);
    expect(await daily()).toEqual([
      [`cron:kit-daily:${t1}`, t1],
      [`cron:kit-daily:${t2}`, t2],
    ]);
    // A new test: the clock is reset, the runs are gone; the schedule waits for its next tick after
    // the wall clock again, not for the one after the clock of the test before.
    resetTestClock();
    await db.query(`delete from ai_runs where kind = 'kit-daily'`);
    await advanceTestClock(app, DAY);
    expect(await daily()).toEqual([[`cron:kit-daily:${t1}`, t1]]);
    const id = (await db.query(`select id from ai_runs where kind = 'kit-daily'`))[0].id as string;
    expect((await driveRun(app, id)).output).toBe(t1);
  });

  it('an unknown or paused schedule is a typed error, and nothing starts', async () => {
    const count = async () => (await db.query(`select count(*)::int as n from ai_runs`))[0].n;
    const n = await count();
    await expect(fireSchedule(app, 'no-such-schedule')).rejects.toBeInstanceOf(ScheduleNotFoundError);
    await expect(fireSchedule(app, 'no-such-schedule')).rejects.toMatchObject({
      code: 'DURABLE_SCHEDULE_NOT_FOUND',
    });
    await app.get(DurableSchedules).pause('kit-nightly');
    await expect(fireSchedule(app, 'kit-nightly')).rejects.toBeInstanceOf(InvalidArgumentError);
    await app.get(DurableSchedules).resume('kit-nightly');
    expect(await count()).toBe(n);
  });
});
