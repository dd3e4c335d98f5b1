import { INestApplication, Injectable } from '@nestjs/common';
import { DurableStep, DurableWorkflow, RunContext, RunRepository } from '../../src';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil } from '../helpers/drive';

/**
 * A park runs no user code (issue 45 part 2): a run that parks on a sleep or a signal wait leaves its
 * workflow's code waiting, so `catch` and `finally` run where plain JavaScript runs them (once, at the
 * end), not once per park. On 834a499: catch 2 (plain: 0), finally 3 (plain: 1) for two sleeps.
 */
/** Counters per execution of the workflow's code (a claim, or the replay check's replay). */
const executions = new Map<RunContext, { catches: number; finallies: number }>();
const count = (ctx: RunContext) => {
  let c = executions.get(ctx);
  if (!c) executions.set(ctx, (c = { catches: 0, finallies: 0 }));
  return c;
};

@Injectable()
class ParkSteps {
  @DurableStep({ name: 'work' })
  async work(n: number) {
    return n * 2;
  }
}

@DurableWorkflow('park-try')
class ParkTry {
  constructor(private readonly steps: ParkSteps) {}
  async run(_input: unknown, ctx: RunContext) {
    count(ctx); // this execution, counted from its start
    let out = 0;
    try {
      await ctx.sleep(100);
      out += await this.steps.work(1);
      await ctx.sleep(100);
      out += await this.steps.work(2);
    } catch {
      count(ctx).catches++;
    } finally {
      count(ctx).finallies++;
    }
    return out;
  }
}

@DurableWorkflow('park-signal-try')
class ParkSignalTry {
  constructor(private readonly steps: ParkSteps) {}
  async run(_input: unknown, ctx: RunContext) {
    count(ctx);
    try {
      const approval = await ctx.waitForSignal<{ ok: boolean }>('approval');
      return { approval, doubled: await this.steps.work(21) };
    } catch {
      count(ctx).catches++;
      return 'caught';
    } finally {
      count(ctx).finallies++;
    }
  }
}

describe('a park runs no user code', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let runs: RunRepository;
  beforeAll(async () => {
    db = await createTestDatabase('park_no_user_code');
    app = await bootApp(db.url, [ParkSteps, ParkTry, ParkSignalTry]);
    runs = app.get(RunRepository);
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });
  beforeEach(() => executions.clear());
  /**
   * Every execution (each claim, and each replay the replay check makes of it): catch never, finally at
   * most once; at least `parked` of them were left waiting (no finally) and one ran to the end (finally).
   */
  const expectPlainJavaScript = (parked: number, finished = true) => {
    const all = [...executions.values()];
    expect(all.filter((c) => c.catches > 0)).toEqual([]);
    expect(all.filter((c) => c.finallies > 1)).toEqual([]);
    expect(all.filter((c) => c.finallies === 0).length).toBeGreaterThanOrEqual(parked);
    expect(all.some((c) => c.finallies === 1)).toBe(finished);
  };

  it('try/catch/finally around two sleeps: catch 0, finally 1, as in plain JavaScript', async () => {
    const { run } = await runs.start('park-try', {});
    const done = await driveUntil(app, db, run.id);
    expect(done.status).toBe('succeeded');
    expect(done.output).toBe(6);
    const parks = await db.query(
      `select count(*)::int as n from ai_events where run_id = $1 and event_type = 'run.claimed'`,
      [run.id],
    );
    // Each claim but the last parked: its code was left waiting, and the next one resumed it by replay.
    expect(parks[0].n).toBeGreaterThanOrEqual(3);
    expectPlainJavaScript(parks[0].n - 1);
  });

  it('a signal wait: parked without running the catch or finally, then they run once', async () => {
    const { run } = await runs.start('park-signal-try', {});
    const parked = await driveUntil(app, db, run.id, ['waiting']);
    expect(parked.status).toBe('waiting');
    expectPlainJavaScript(1, false);
    await runs.signal(run.id, 'approval', { ok: true });
    const done = await driveUntil(app, db, run.id);
    expect(done.output).toEqual({ approval: { ok: true }, doubled: 42 });
    expectPlainJavaScript(1);
  });
});
