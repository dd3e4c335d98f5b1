import { INestApplication, Injectable } from '@nestjs/common';
import {
  CommandContext,
  DurableStep,
  DurableWorkflow,
  IdempotentCommand,
  OnRunCancel,
  RunCancelInfo,
  RunContext,
  RunRepository,
} from '../../src';
import { DurableWorker } from '../../src/engine/worker.service';
import { replayRuns } from '../../src/testing';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil, gate } from '../helpers/drive';
import { FakeTarget, startFakeTarget } from '../helpers/fake-target';
import { spawnWorker, waitFor, WorkerProcess } from '../helpers/processes';
import { prepareWorkerSchema } from '../helpers/schema';
import { TRAIL } from '../helpers/event-trail';

/**
 * Issue 19, item 11: after a cancel, a workflow cleans up in `onCancel` (its own recorded phase), and
 * the run ends cancelled whatever the cleanup does. A crash in the middle of the cleanup resumes it
 * without repeating a side effect; the replay check replays both phases.
 */

const CLEANUP_BASE = 1_000_000_000;
const calls: string[] = [];
const infos = new Map<string, RunCancelInfo>();
/** A step body the test holds open while it cancels the run. */
let held = gate();
/** Flipped by the replay-check test: the cleanup takes another path than the one recorded. */
let otherPath = false;

@Injectable()
class Shop {
  @IdempotentCommand({ name: 'charge', inDoubt: 'retry-with-key' })
  async charge(args: { amount: number }, ctx?: CommandContext) {
    calls.push(`charge:${ctx!.idempotencyKey}`);
    return { chargeId: `ch_${args.amount}` };
  }
  @IdempotentCommand({ name: 'refund', inDoubt: 'retry-with-key' })
  async refund(args: { chargeId: string }, ctx?: CommandContext) {
    calls.push(`refund:${args.chargeId}:${ctx!.idempotencyKey}`);
    return { refunded: args.chargeId };
  }
  @DurableStep({ name: 'slow' })
  async slow(runId: string) {
    calls.push(`slow:${runId}`);
    await held.promise;
    return 'slow done';
  }
  @DurableStep({ name: 'after' })
  async after(runId: string) {
    calls.push(`after:${runId}`);
    return 'after';
  }
  @DurableStep({ name: 'tell' })
  async tell(runId: string, what: string) {
    calls.push(`tell:${runId}:${what}`);
    return what;
  }
  @DurableStep({ name: 'broken', retry: { maxAttempts: 1 } })
  async broken() {
    throw Object.assign(new Error('mail server said no'), { retryable: false });
  }
}

type Shape = 'refund' | 'throws' | 'sleeps' | 'caught';

@DurableWorkflow('cleanup-shop')
class ShopWorkflow implements OnRunCancel<{ shape: Shape }> {
  constructor(private readonly shop: Shop) {}

  async run(input: { shape: Shape }, ctx: RunContext) {
    const { chargeId } = await this.shop.charge({ amount: 30 });
    try {
      await this.shop.slow(ctx.runId); // the test cancels while this runs
    } catch (err) {
      if (input.shape !== 'caught') throw err;
    }
    await this.shop.after(ctx.runId); // never: the run was cancelled
    return chargeId;
  }

  async onCancel(input: { shape: Shape }, ctx: RunContext, cancel: RunCancelInfo) {
    infos.set(ctx.runId, cancel);
    const charge = cancel.completed.find((c) => c.name === 'command:charge' && !c.failed);
    if (charge) await this.shop.refund({ chargeId: (charge.output as { chargeId: string }).chargeId });
    if (input.shape === 'throws') await this.shop.broken();
    if (input.shape === 'sleeps') await ctx.sleep(1000);
    await this.shop.tell(ctx.runId, otherPath ? 'another message' : `cancelled: ${cancel.reason}`);
  }
}

describe('cleanup after a cancel (onCancel)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let runs: RunRepository;

  beforeAll(async () => {
    db = await createTestDatabase('cleanup');
    app = await bootApp(db.url, [Shop, ShopWorkflow]);
    runs = app.get(RunRepository);
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  /** Starts a run, lets it reach `slow`, cancels it there, then lets the step body end. */
  async function cancelWhileSlow(shape: Shape): Promise<string> {
    held = gate();
    const { run } = await runs.start(ShopWorkflow, { shape });
    const worker = app.get(DurableWorker);
    await worker.tick();
    await waitFor(async () => calls.includes(`slow:${run.id}`), 5000, 'the slow step to run');
    await runs.cancel(run.id, 'customer left');
    await worker.heartbeat(); // the worker learns of the cancel while the step body runs
    held.open();
    await worker.idle();
    return run.id;
  }

  const events = async (id: string) =>
    (await db.query(`select event_type, payload from ${TRAIL} t where run_id = $1 order by id`, [
      id,
    ])) as Array<{
      event_type: string;
      payload: Record<string, unknown>;
    }>;

  it('refunds what run() charged, in positions of its own, and the run ends cancelled', async () => {
    const id = await cancelWhileSlow('refund');
    const run = (await runs.get(id))!;
    expect(run.status).toBe('cancelled');
    expect(calls).not.toContain(`after:${id}`);
    expect(infos.get(id)).toEqual({
      reason: 'customer left',
      completed: [{ index: 0, name: 'command:charge', output: { chargeId: 'ch_30' }, failed: false }],
    });
    expect(calls.filter((c) => c.startsWith('refund:ch_30:'))).toEqual([
      `refund:ch_30:run_${id}:step_${CLEANUP_BASE + 1}:refund`,
    ]);
    expect(calls).toContain(`tell:${id}:cancelled: customer left`);
    const cps = await db.query(
      `select step_index, step_name from ai_checkpoints where run_id = $1 order by step_index`,
      [id],
    );
    expect(cps.map((c: { step_name: string }) => c.step_name)).toEqual([
      'command:charge',
      '$cancelled',
      'command:refund',
      'tell',
    ]);
    const trail = await events(id);
    expect(trail.filter((e) => e.event_type === 'run.cleanup_started')).toHaveLength(1);
    expect(trail.at(-1)).toEqual({ event_type: 'run.cancelled', payload: { by: 'worker', cleanup: 'done' } });
    // The replay check replays both phases: run() up to the cancel, then onCancel from its record.
    expect(await replayRuns(app, { runIds: [id] })).toEqual([
      expect.objectContaining({ runId: id, problems: [] }),
    ]);
  });

  it('a workflow that catches the cancel still makes no call of run() after it', async () => {
    const id = await cancelWhileSlow('caught');
    expect((await runs.get(id))!.status).toBe('cancelled');
    expect(calls).not.toContain(`after:${id}`);
    expect(calls).toContain(`tell:${id}:cancelled: customer left`);
  });

  it('a cleanup that throws: the run still ends cancelled, the error is in the trail', async () => {
    const id = await cancelWhileSlow('throws');
    expect((await runs.get(id))!.status).toBe('cancelled');
    const trail = await events(id);
    expect(trail.filter((e) => e.event_type === 'run.cancelled')).toEqual([
      {
        event_type: 'run.cancelled',
        payload: { by: 'worker', cleanup: 'failed', cleanupError: 'mail server said no' },
      },
    ]);
    // The failure the cleanup ended with is recorded: the record of the cleanup is whole.
    expect(trail.filter((e) => e.event_type === 'step.failed')).toEqual([
      {
        event_type: 'step.failed',
        payload: { step: CLEANUP_BASE + 2, name: 'broken', error: 'mail server said no' },
      },
    ]);
  });

  it('a cleanup that waits is refused with a usage error, once: no cancelled run parks and wakes forever', async () => {
    const id = await cancelWhileSlow('sleeps');
    expect((await runs.get(id))!.status).toBe('cancelled');
    const trail = await events(id);
    expect(trail.at(-1)!.payload).toMatchObject({ by: 'worker', cleanup: 'failed' });
    expect(String(trail.at(-1)!.payload.cleanupError)).toMatch(/ctx\.sleep\(\) is not allowed in onCancel/);
    expect(trail.filter((e) => e.event_type === 'run.claimed')).toHaveLength(1);
    expect(calls).not.toContain(`tell:${id}:cancelled: customer left`);
  });

  it('the replay check sees a cleanup that takes another path than its record', async () => {
    const id = await cancelWhileSlow('refund');
    otherPath = true;
    try {
      const [result] = await replayRuns(app, { runIds: [id] });
      expect(result.problems.join('\n')).toMatch(/^onCancel: .*tell/m);
    } finally {
      otherPath = false;
    }
  });

  it('a run cancelled while parked ends at once, with no cleanup (documented)', async () => {
    const { run } = await runs.start(ShopWorkflow, { shape: 'refund' });
    await runs.cancel(run.id, 'before it ran');
    expect((await driveUntil(app, db, run.id)).status).toBe('cancelled');
    expect(infos.has(run.id)).toBe(false);
  });
});

describe('a worker killed in the middle of a cleanup', () => {
  let db: TestDatabase;
  let target: FakeTarget;
  const workers: WorkerProcess[] = [];
  const spawn = (env: Record<string, string> = {}) => {
    const w = spawnWorker({ DB_URL: db.url, TARGET_URL: target.url, HOLD_MS: '1500', ...env });
    workers.push(w);
    return w;
  };

  beforeAll(async () => {
    db = await createTestDatabase('cleanupcrash');
    await prepareWorkerSchema(db.url);
    target = await startFakeTarget({ honoursKeys: false }); // every POST is an effect
  });
  afterAll(async () => {
    for (const w of workers.splice(0)) {
      w.child.kill('SIGKILL');
      await w.exited;
    }
    await target.close();
    await db.drop();
  });

  it('is resumed by another worker: the refund is looked up, not sent again, and the run ends cancelled', async () => {
    const producer = await bootApp(db.url);
    try {
      const [{ id }] = await db.query(
        `insert into ai_runs (kind, input) values ('cancel-refund', '{"amount": 42}') returning id`,
      );
      const chargeKey = `run_${id}:step_0:charge_card`;
      const refundKey = `run_${id}:step_${CLEANUP_BASE + 1}:refund_card`;
      const victim = spawn({ DURABLE_CRASH_AT: `after-command-dispatch@${CLEANUP_BASE + 1}` });
      await waitFor(async () => target.effects()[chargeKey] === 1, 20_000, 'the charge');
      await producer.get(RunRepository).cancel(id, 'customer left');
      expect((await victim.exited).signal).toBe('SIGKILL'); // killed right after sending the refund
      expect(target.effects()[refundKey]).toBe(1);
      spawn();
      await waitFor(
        async () =>
          (await db.query(`select status from ai_runs where id = $1`, [id]))[0].status === 'cancelled',
        30_000,
        'the run to end cancelled',
      );
      expect(target.effects()[refundKey]).toBe(1);
      expect(target.effects()[chargeKey]).toBe(1);
      const told = await db.query(
        `select ref from step_effects where run_id = $1 and step = 'notify_buyer'`,
        [id],
      );
      expect(told).toEqual([{ ref: 'customer left' }]);
      const [cancelled] = await db.query(
        `select payload from ${TRAIL} t where run_id = $1 and event_type = 'run.cancelled'`,
        [id],
      );
      expect(cancelled.payload).toEqual({ by: 'worker', cleanup: 'done' });
      const [refund] = await db.query(
        `select status, resolution from ai_commands where idempotency_key = $1`,
        [refundKey],
      );
      expect(refund).toEqual({ status: 'succeeded', resolution: 'lookup' });
    } finally {
      await producer.close();
    }
  }, 90_000);
});
