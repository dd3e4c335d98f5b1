import { INestApplication } from '@nestjs/common';
import { DurableWorkflow, RunContext, RunRepository, SignalTimeoutError } from '../../src';
import { advanceTestClock, driveRun, resetTestClock } from '../../src/testing';
import { bootApp } from '../helpers/app';
import { DurableWorker } from '../../src/engine/worker.service';
import { createTestDatabase, TestDatabase } from '../helpers/database';

/**
 * Issue 20, item 4: time skipping in the test kit, against the real PostgreSQL. `driveRun` skips the
 * time a run is parked until (it re-slept a 24 h sleep on every tick before); `advanceTestClock` moves
 * sleeps, signal timeouts and `ctx.now()` for every run, and never a lease.
 */

const DAY = 24 * 3600_000;

@DurableWorkflow('nap')
class NapWorkflow {
  async run(_input: unknown, ctx: RunContext) {
    await ctx.sleep(DAY);
    return 'rested';
  }
}

@DurableWorkflow('trial')
class TrialWorkflow {
  async run(_input: unknown, ctx: RunContext) {
    const started = ctx.now();
    await ctx.sleep(DAY);
    const woke = ctx.now();
    let approval: unknown;
    try {
      approval = await ctx.waitForSignal('approve', { timeoutMs: 3 * DAY });
    } catch (err) {
      if (!(err instanceof SignalTimeoutError)) throw err;
      approval = 'timed out';
    }
    return {
      sleptMs: woke.getTime() - started.getTime(),
      approval,
      decidedAt: ctx.now().getTime() - started.getTime(),
    };
  }
}

describe('the test clock', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let runs: RunRepository;
  const tick = async () => {
    const worker = app.get(DurableWorker);
    await worker.tick();
    await worker.idle();
  };
  const status = async (id: string) =>
    (await db.query(`select status, parked_reason, lease_expires_at from ai_runs where id = $1`, [id]))[0];

  beforeAll(async () => {
    db = await createTestDatabase('test_clock');
    app = await bootApp(db.url, [NapWorkflow, TrialWorkflow]);
    runs = app.get(RunRepository);
  });
  afterEach(() => resetTestClock());
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('driveRun skips the time a run sleeps: a 24 h sleep takes a tick, not a day', async () => {
    const t0 = Date.now();
    const { run } = await runs.start(NapWorkflow, {});
    const done = await driveRun(app, run.id, ['succeeded', 'failed'], 2); // park, then one more tick;
    expect(done).toMatchObject({ status: 'succeeded', output: 'rested' });
    expect(Date.now() - t0).toBeLessThan(5000);
  });

  it('advanceTestClock: a 24 h sleep, then a 3-day signal timeout, skipped in milliseconds; ctx.now() moves with them', async () => {
    const t0 = Date.now();
    const { run } = await runs.start(TrialWorkflow, {});
    expect((await driveRun(app, run.id, ['waiting'], 5)).parkedReason).toBe('sleeping');
    // Nothing is due before the clock moves (a plain tick: driveRun would skip the sleep itself).
    await tick();
    expect((await status(run.id)).parked_reason).toBe('sleeping');
    expect(await advanceTestClock(app, DAY - 5000)).toBe(1);
    await tick();
    expect((await status(run.id)).parked_reason).toBe('sleeping'); // five seconds short
    await advanceTestClock(app, 5000);
    await tick();
    expect((await status(run.id)).parked_reason).toBe('waiting for signal "approve"');
    await advanceTestClock(app, 3 * DAY - 5000);
    await tick();
    expect((await status(run.id)).parked_reason).toBe('waiting for signal "approve"'); // not yet
    await advanceTestClock(app, 5000);
    await tick();
    const done = (await runs.get(run.id))!;
    expect(done.status).toBe('succeeded');
    const out = done.output as { sleptMs: number; approval: unknown; decidedAt: number };
    expect(out.approval).toBe('timed out');
    expect(out.sleptMs).toBeGreaterThanOrEqual(DAY);
    expect(out.decidedAt).toBeGreaterThanOrEqual(4 * DAY);
    expect(Date.now() - t0).toBeLessThan(10_000);
  });

  it('leases never move, and a signal still wins before its timeout', async () => {
    const { run } = await runs.start(TrialWorkflow, {});
    await driveRun(app, run.id, ['waiting'], 5);
    await advanceTestClock(app, DAY);
    await driveRun(app, run.id, ['waiting'], 3); // now waiting for the signal
    await advanceTestClock(app, DAY); // a day of the three
    await runs.signal(run.id, 'approve', { ok: true });
    const done = await driveRun(app, run.id, ['succeeded'], 5);
    expect((done.output as { approval: unknown }).approval).toEqual({ ok: true });
    // A running run's lease is untouched by the clock.
    await db.query(
      `update ai_runs set status = 'running', worker_id = 'w', lease_expires_at = now() + interval '30 seconds' where id = $1`,
      [run.id],
    );
    const before = (await status(run.id)).lease_expires_at.getTime();
    await advanceTestClock(app, 10 * DAY);
    expect((await status(run.id)).lease_expires_at.getTime()).toBe(before);
  });

  it('refuses a negative or fractional skip', async () => {
    await expect(advanceTestClock(app, -1)).rejects.toThrow(
      /ms must be an integer number of milliseconds >= 0/,
    );
    await expect(advanceTestClock(app, 1.5)).rejects.toThrow(/ms must be/);
  });

  it('driveRun on a run already in a wanted status returns it at once and fires no timer (issue 36)', async () => {
    const { run } = await runs.start(TrialWorkflow, {});
    const waiting = await driveRun(app, run.id, ['waiting']); // parked on its 24 h sleep
    expect(waiting.status).toBe('waiting');
    const before = await status(run.id);
    const again = await driveRun(app, run.id, ['waiting']);
    expect(again.status).toBe('waiting');
    // Nothing was driven: the sleep's due time did not move, no claim was made.
    expect(await status(run.id)).toEqual(before);
    const claims = await db.query(
      `select count(*)::int as n from ai_events where run_id = $1 and event_type = 'run.claimed'`,
      [run.id],
    );
    expect(claims[0].n).toBe(1);
  });

  it("what driveRun skips for a run, that run's ctx.now() sees (issue 36)", async () => {
    const { run } = await runs.start(TrialWorkflow, {});
    await driveRun(app, run.id, ['waiting']); // asleep
    await driveRun(app, run.id, ['waiting']); // no-op: already waiting
    const woke = async () => (await db.query(`select status from ai_runs where id = $1`, [run.id]))[0];
    expect((await woke()).status).toBe('waiting');
    // The sleep (24 h) and then the approval's timeout (3 days) are skipped for this run.
    const out = (await driveRun(app, run.id)).output as {
      sleptMs: number;
      approval: unknown;
      decidedAt: number;
    };
    expect(out.approval).toBe('timed out');
    expect(out.sleptMs).toBeGreaterThanOrEqual(DAY);
    expect(out.decidedAt).toBeGreaterThanOrEqual(4 * DAY);
  });
});
