import { INestApplication } from '@nestjs/common';
import {
  DURABLE_HTTP_STATUS,
  DurableCron,
  DurableExecutionError,
  DurableSchedules,
  DurableWorkflow,
  InvalidOptionsError,
  PayloadTooLargeError,
  RunContext,
  RunRepository,
  ScheduleTooFrequentError,
  TooManyPendingSignalsError,
} from '../../src';
import { DurableAdminModule } from '../../src/admin';
import { cli } from '../../src/cli/main';
import { ScheduleRunner } from '../../src/maintenance/schedule-runner.service';
import { bootApp, bootError, bootHttpApp, durableModule } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil } from '../helpers/drive';

/**
 * Issue 46, part 5: limits where a caller can flood. A run's mailbox is bounded (3,000 signals no wait
 * has taken, 1,000 of one name, by default): one more is refused with TooManyPendingSignalsError (429),
 * nothing stored, counted race-free under the run's row lock; a schedule made at run time may not fire
 * more often than once a minute by default (ScheduleTooFrequentError, 400), while a @DurableCron in the
 * code may; a schedule's input is held to the input cap while it is walked.
 */
@DurableWorkflow('mailbox')
class Mailbox {
  async run(_input: unknown, ctx: RunContext) {
    return ctx.waitForSignal('never');
  }
}

@DurableWorkflow('consumer')
class Consumer {
  async run(_input: unknown, ctx: RunContext) {
    const got = await ctx.waitForSignal<number>('go');
    await ctx.waitForSignal('never');
    return got;
  }
}

@DurableCron('* * * * * *', { name: 'code-every-second' })
@DurableWorkflow('ticker')
class Ticker {
  async run() {
    return 1;
  }
}

const providers = [Mailbox, Consumer, Ticker];

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('caller_limits');
});
afterAll(async () => {
  await db?.drop();
});

const pendingOf = async (runId: string) =>
  (
    await db.query(`select count(*)::int as n from ai_signals where run_id = $1 and consumed_at is null`, [
      runId,
    ])
  )[0].n as number;
/** Stores `n` pending signals named `name` directly (a run that received them over time). */
const prefill = (runId: string, name: string, n: number) =>
  db.query(
    `insert into ai_signals (run_id, name, payload) select $1, $2, to_jsonb(g) from generate_series(1, $3) g`,
    [runId, name, n],
  );

describe('with the default limits', () => {
  let app: INestApplication;
  let http: string;
  let runs: RunRepository;
  let schedules: DurableSchedules;

  beforeAll(async () => {
    const booted = await bootHttpApp(db.url, {
      imports: [DurableAdminModule.forRoot({ allowAnonymous: true, observability: false })],
      providers,
    });
    app = booted.app;
    http = `${booted.http}/durable/api`;
    runs = app.get(RunRepository);
    schedules = app.get(DurableSchedules);
  });
  afterAll(async () => {
    await app?.close();
  });

  it('the 3,001st pending signal of a run is refused (and the 1,001st of one name), nothing stored', async () => {
    const { run } = await runs.start('mailbox', {});
    await driveUntil(app, db, run.id, ['waiting']);
    await prefill(run.id, 'a', 999);
    await runs.signal(run.id, 'a', 1000); // the 1,000th of its name
    const named = await runs.signal(run.id, 'a', 1001).catch((e: unknown) => e);
    expect(named).toBeInstanceOf(TooManyPendingSignalsError);
    expect(named).toMatchObject({
      code: 'DURABLE_TOO_MANY_PENDING_SIGNALS',
      runId: run.id,
      signalName: 'a',
      scope: 'name',
      limit: 1000,
    });
    expect((named as Error).message).toContain('limits.maxPendingSignalsPerName');
    expect((named as Error).message).toContain('Send it again once the run has taken some');
    expect(await pendingOf(run.id)).toBe(1000);

    await prefill(run.id, 'b', 1000);
    await prefill(run.id, 'c', 999);
    await runs.signal(run.id, 'd', { n: 3000 }); // the 3,000th
    const events = (await runs.events(run.id)).filter((e) => e.type === 'signal.sent');
    const full = await runs.signal(run.id, 'e', { n: 3001 }).catch((e: unknown) => e);
    expect(full).toMatchObject({ code: 'DURABLE_TOO_MANY_PENDING_SIGNALS', scope: 'run', limit: 3000 });
    expect((full as Error).message).toContain('limits.maxPendingSignals)');
    expect(await pendingOf(run.id)).toBe(3000);
    expect((await runs.events(run.id)).filter((e) => e.type === 'signal.sent')).toEqual(events);

    // Over HTTP: a 429 with the code, from the admin API and the app's own filter.
    const res = await fetch(`${http}/runs/${run.id}/signal`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'f', payload: 1 }),
    });
    expect(res.status).toBe(429);
    expect(await res.json()).toMatchObject({ code: 'DURABLE_TOO_MANY_PENDING_SIGNALS' });
    expect(DURABLE_HTTP_STATUS.DURABLE_TOO_MANY_PENDING_SIGNALS).toBe(429);
    expect(await pendingOf(run.id)).toBe(3000);
  });

  it('a schedule made at run time that fires every second is refused; every minute is not; @DurableCron may', async () => {
    const write = (name: string, cron: string) => schedules.create(name, 'mailbox', cron).catch((e) => e);
    const refused: Array<[string, string, unknown]> = [
      ['fast-1', '* * * * * *', 1000],
      ['fast-30', '*/30 * * * * *', 30_000],
      // Second 59, then second 0 of the next minute: 1 s apart (or 59 s, whichever it meets first).
      ['fast-59', '0,59 * * * * *', expect.any(Number)],
    ];
    for (const [name, cron, gap] of refused) {
      const out = await write(name, cron);
      expect(out).toBeInstanceOf(ScheduleTooFrequentError);
      expect(out).toMatchObject({
        code: 'DURABLE_SCHEDULE_TOO_FREQUENT',
        cron,
        intervalMs: gap,
        minIntervalMs: 60_000,
      });
      expect((out as ScheduleTooFrequentError).intervalMs).toBeLessThan(60_000);
      expect((out as Error).message).toContain('limits.minScheduleIntervalMs');
      expect((out as Error).message).toContain('@DurableCron');
    }
    for (const [name, cron] of [
      ['minutely', '0 * * * * *'],
      ['five', '*/5 * * * *'],
    ])
      expect(await write(name, cron)).toMatchObject({ cron, source: 'api' });
    await app.get(ScheduleRunner).declareOnce(); // the @DurableCron of the code, every second
    const names = (await schedules.list()).map((s) => s.name).sort();
    expect(names).toEqual(['code-every-second', 'five', 'minutely']);

    // The admin API: a 400 naming cron; the CLI: exit 1 with the reason; nothing written either way.
    const res = await fetch(`${http}/schedules`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'api-fast', kind: 'mailbox', cron: '*/10 * * * * *' }),
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({
      code: 'DURABLE_SCHEDULE_TOO_FREQUENT',
      errors: [{ field: 'cron', messages: [expect.stringContaining('10 s apart')] }],
    });
    expect(DURABLE_HTTP_STATUS.DURABLE_SCHEDULE_TOO_FREQUENT).toBe(400);
    const stderr: string[] = [];
    const status = await cli(
      ['create-schedule', 'cli-fast', 'mailbox', '*/2 * * * * *'],
      { DATABASE_URL: db.url },
      () => undefined,
      (l) => stderr.push(l),
    );
    expect(status).toBe(1);
    expect(stderr.join('\n')).toContain('limits.minScheduleIntervalMs');
    const [{ n }] = await db.query(
      `select count(*)::int as n from ai_schedules where name in ('api-fast', 'cli-fast')`,
    );
    expect(n).toBe(0);
  });

  it("a schedule's input is held to the input cap while it is walked: a 500,000-key input is refused, nothing written", async () => {
    const wide: Record<string, number> = {};
    for (let i = 0; i < 500_000; i++) wide[`key${i}`] = i;
    let reads = 0;
    const counted = new Proxy(wide, {
      get(t, k, r) {
        if (typeof k === 'string' && k.startsWith('key')) reads++;
        return Reflect.get(t, k, r);
      },
    });
    const err = await schedules.create('wide', 'mailbox', '0 3 * * *', { input: counted }).catch((e) => e);
    expect(err).toBeInstanceOf(PayloadTooLargeError);
    expect((err as Error).message).toContain('input of schedule "wide"');
    expect(reads).toBeLessThan(250_000);
    expect(await db.query(`select name from ai_schedules where name = 'wide'`)).toEqual([]);
    // Not JSON is refused as for a run's input, naming the path.
    const bad = await schedules
      .create('bad-input', 'mailbox', '0 3 * * *', { input: { at: () => 1 } })
      .catch((e) => e);
    expect(bad).toMatchObject({ code: 'DURABLE_NOT_SERIALIZABLE' });
  });

  it('the patch-status route refuses a kind the CLI refuses (a newline), naming the field', async () => {
    const res = await fetch(`${http}/patch-status?kind=${encodeURIComponent('a\nb')}&patchId=p1`);
    expect(res.status).toBe(400);
    const body = JSON.stringify(await res.json());
    expect(body).toContain('kind');
    expect(body).toContain('control characters');
    const direct = await runs.patchStatus('a\nb', 'p1').catch((e) => e);
    expect(direct).toMatchObject({ code: 'DURABLE_INVALID_ARGUMENT', field: 'kind' });
    expect((await fetch(`${http}/patch-status?kind=mailbox&patchId=p1`)).status).toBe(200);
  });
});

describe('with limits of its own', () => {
  let app: INestApplication;
  let runs: RunRepository;

  beforeAll(async () => {
    app = await bootApp(db.url, providers, {
      limits: { maxPendingSignals: 12, maxPendingSignalsPerName: 5, minScheduleIntervalMs: 0 },
    });
    runs = app.get(RunRepository);
  });
  afterAll(async () => {
    await app?.close();
  });

  it('concurrent senders store exactly up to the limits: the count is taken under the run lock', async () => {
    const { run } = await runs.start('mailbox', {});
    await driveUntil(app, db, run.id, ['waiting']);
    const send = (name: string, i: number) =>
      runs.signal(run.id, name, i).then(
        () => 'stored',
        (e: unknown) => (e instanceof TooManyPendingSignalsError ? e.scope : e),
      );
    const same = await Promise.all(Array.from({ length: 20 }, (_, i) => send('x', i)));
    expect(same.filter((r) => r === 'stored')).toHaveLength(5);
    expect(same.filter((r) => r === 'name')).toHaveLength(15);
    expect(await pendingOf(run.id)).toBe(5);
    const many = await Promise.all(Array.from({ length: 20 }, (_, i) => send(`y${i}`, i)));
    expect(many.filter((r) => r === 'stored')).toHaveLength(7);
    expect(many.filter((r) => r === 'run')).toHaveLength(13);
    expect(await pendingOf(run.id)).toBe(12);
  });

  it('a signal a wait took no longer counts: its place is free again', async () => {
    const { run } = await runs.start('consumer', {});
    await driveUntil(app, db, run.id, ['waiting']);
    for (let i = 1; i <= 5; i++) await runs.signal(run.id, 'go', i);
    await expect(runs.signal(run.id, 'go', 6)).rejects.toMatchObject({ scope: 'name' });
    // Until it took 'go' 1 and waits for 'never' (a tick may claim other due runs first).
    for (let i = 0; i < 20 && (await pendingOf(run.id)) === 5; i++)
      await driveUntil(app, db, run.id, ['waiting']);
    expect(await pendingOf(run.id)).toBe(4);
    await runs.signal(run.id, 'go', 6);
    expect(await pendingOf(run.id)).toBe(5);
  });

  it('minScheduleIntervalMs: 0 lets a schedule made at run time fire every second', async () => {
    await expect(
      app.get(DurableSchedules).create('fast-ok', 'mailbox', '* * * * * *'),
    ).resolves.toMatchObject({ cron: '* * * * * *' });
  });

  it('refuses bad limits, naming the field', async () => {
    const err = await bootError({
      imports: [durableModule(db.url, { limits: { maxPendingSignals: 10, maxPendingSignalsPerName: 20 } })],
    });
    expect(err).toBeInstanceOf(InvalidOptionsError);
    expect((err as DurableExecutionError).message).toContain(
      'limits.maxPendingSignalsPerName: must not exceed limits.maxPendingSignals (10); got 20',
    );
  });
});
