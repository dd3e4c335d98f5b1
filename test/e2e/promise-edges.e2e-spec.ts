import { INestApplication, Injectable } from '@nestjs/common';
import {
  CommandContext,
  CommandGateway,
  CommandLookup,
  DurableStep,
  DurableWorkflow,
  IdempotentCommand,
  RunContext,
  RunRepository,
} from '../../src';
import { DurableWorker } from '../../src/engine/worker.service';
import { Reconciler } from '../../src/maintenance/reconciler.service';
import { setPausePointHook, PausePointInfo } from '../../src/testing';
import { Client } from 'pg';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil, gate } from '../helpers/drive';

/**
 * Regression tests of issue 13, items 0–2 and 4: a frozen worker (zombie) must not call out after a
 * takeover, outside actions racing a park must never strand the run, and a process never claims a
 * run it still drives. Two apps (workers A and B) share one database; a test-only pause hook freezes
 * one run at a named point while the other worker takes it over.
 */

/** A target that does NOT deduplicate keys: every call is an effect. `lookup` says whether it saw a key. */
const effects = new Map<string, number>();
const stepBodies = new Map<string, number>();
const count = (m: Map<string, number>, k: string) => m.set(k, (m.get(k) ?? 0) + 1);

@Injectable()
class Vendor implements CommandLookup {
  @IdempotentCommand({ name: 'send', inDoubt: 'lookup' })
  async send(args: { to: string }, ctx?: CommandContext) {
    count(effects, ctx!.idempotencyKey);
    return { sent: args.to, epoch: ctx!.fence.epoch };
  }
  @IdempotentCommand({ name: 'pay_manual', inDoubt: 'manual' })
  async payManual(args: { amount: number }, ctx?: CommandContext) {
    count(effects, ctx!.idempotencyKey);
    return { paid: args.amount };
  }
  @IdempotentCommand({ name: 'pay_keyed', inDoubt: 'retry-with-key' })
  async payKeyed(args: { amount: number }, ctx?: CommandContext) {
    count(effects, ctx!.idempotencyKey);
    return { paid: args.amount };
  }
  @IdempotentCommand({ name: 'pay_approved', inDoubt: 'lookup', requiresApproval: true })
  async payApproved(args: { amount: number }, ctx?: CommandContext) {
    count(effects, ctx!.idempotencyKey);
    return { paid: args.amount };
  }
  async lookupCommand(_c: string, key: string) {
    return effects.has(key)
      ? { found: true as const, result: { sent: 'looked-up' } }
      : { found: false as const };
  }
}

@Injectable()
class Model {
  @DurableStep({ name: 'think', kind: 'model' })
  async think(prompt: string) {
    count(stepBodies, prompt);
    return { answer: prompt.toUpperCase() };
  }
}

@DurableWorkflow('edge')
class EdgeWorkflow {
  constructor(
    private readonly vendor: Vendor,
    private readonly model: Model,
  ) {}
  async run(input: { shape: string }, ctx: RunContext) {
    switch (input.shape) {
      case 'send':
        return this.vendor.send({ to: 'a@example.com' });
      case 'think':
        return this.model.think(`prompt-${ctx.runId}`);
      case 'manual':
        return this.vendor.payManual({ amount: 5 });
      case 'keyed':
        return this.vendor.payKeyed({ amount: 7 });
      case 'approval': {
        const paid = await this.vendor.payApproved({ amount: 9 });
        return { paid, hint: await ctx.waitForSignal('never', { timeoutMs: 0 }).catch(() => 'timed out') };
      }
      case 'wait': {
        const before = ctx.uuid();
        const payload = await ctx.waitForSignal<{ n: number }>('go');
        return { before, payload, after: ctx.uuid() };
      }
      default:
        throw new Error(`unknown shape ${input.shape}`);
    }
  }
}

const LEASE = { leaseTtlMs: 600, heartbeatMs: 150 };
let db: TestDatabase;
let a: INestApplication;
let b: INestApplication;

beforeAll(async () => {
  db = await createTestDatabase('edges');
  const providers = [Vendor, Model, EdgeWorkflow];
  a = await bootApp(db.url, providers, { worker: { workerId: 'worker-a', ...LEASE } });
  b = await bootApp(db.url, providers, { worker: { workerId: 'worker-b', ...LEASE } });
});
afterAll(async () => {
  setPausePointHook(null);
  await a?.close();
  await b?.close();
  await db?.drop();
});
/** Every frozen run is let go after each test, whatever happened in it. */
const frozen: Array<() => void> = [];
afterEach(async () => {
  setPausePointHook(null);
  frozen.splice(0).forEach((release) => release());
  await Promise.all([a.get(DurableWorker).idle(), b.get(DurableWorker).idle()]);
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Freezes worker `workerId` at the first matching point until `release()`; `reached` resolves there. */
function freezeAt(match: (i: PausePointInfo) => boolean) {
  const reached = gate<PausePointInfo>();
  const held = gate();
  let armed = true;
  setPausePointHook(async (info) => {
    if (!armed || !match(info)) return;
    armed = false;
    reached.open(info);
    await held.promise;
  });
  frozen.push(() => held.open());
  return { reached: reached.promise, release: () => held.open() };
}

/** Lets A's lease lapse (A frozen, no heartbeat) and B's reconciler return the run to the queue. */
async function takeOver(runId: string): Promise<void> {
  await sleep(LEASE.leaseTtlMs + 150);
  await b.get(Reconciler).sweep();
  const [row] = await db.query(`select status from ai_runs where id = $1`, [runId]);
  expect(row.status).toBe('waiting');
  await db.query(`update ai_runs set available_at = now() where id = $1`, [runId]); // skip the backoff
}

/**
 * Ticks a worker until the run is terminal, WITHOUT making parked runs due (driveUntil does): a run
 * parked at infinity stays parked here, which is exactly what these tests must catch.
 */
async function settle(app: INestApplication, runId: string) {
  const worker = app.get(DurableWorker);
  for (let i = 0; i < 40; i++) {
    await worker.tick();
    await worker.idle();
    const run = (await app.get(RunRepository).get(runId))!;
    if (['succeeded', 'failed', 'cancelled', 'dead_lettered'].includes(run.status)) return run;
    await sleep(25);
  }
  return (await app.get(RunRepository).get(runId))!;
}

async function start(shape: string) {
  const { run } = await a.get(RunRepository).start('edge', { shape });
  return run.id;
}

describe('a zombie never calls out after a takeover (item 0)', () => {
  it('frozen between its command reserve and reading the answer, it does not call the vendor when it wakes', async () => {
    const id = await start('send');
    const zombie = freezeAt(
      (i) => i.workerId === 'worker-a' && i.point === 'after-write' && i.detail === 'tool.command_reserved',
    );
    const attempt = a.get(DurableWorker).tick();
    await zombie.reached;
    await takeOver(id);
    setPausePointHook(null);
    const view = await driveUntil(b, db, id); // B: in doubt → lookup (not found) → dispatch: effect 1
    expect(view.status).toBe('succeeded');
    zombie.release();
    await attempt;
    await a.get(DurableWorker).idle();
    const key = [...effects.keys()].find((k) => k.startsWith(`run_${id}:`))!;
    expect(effects.get(key)).toBe(1);
    expect((view.output as { epoch: number }).epoch).toBeGreaterThan(1);
  });

  it('frozen before a model step body, it does not pay for the model call again after another worker committed it', async () => {
    const id = await start('think');
    const zombie = freezeAt((i) => i.workerId === 'worker-a' && i.point === 'before-call');
    const attempt = a.get(DurableWorker).tick();
    await zombie.reached;
    await takeOver(id);
    setPausePointHook(null);
    expect((await driveUntil(b, db, id)).status).toBe('succeeded');
    zombie.release();
    await attempt;
    await a.get(DurableWorker).idle();
    expect(stepBodies.get(`prompt-${id}`)).toBe(1);
  });

  it('a process never claims a run it still drives, and its stale attempt does not end the new one (item 4)', async () => {
    const id = await start('think');
    const stuck = freezeAt((i) => i.workerId === 'worker-a' && i.point === 'before-call');
    const worker = a.get(DurableWorker);
    const attempt = worker.tick();
    await stuck.reached;
    await takeOver(id);
    expect(await worker.tick()).toBe(0); // its own stale attempt is still in flight here
    setPausePointHook(null);
    stuck.release();
    await attempt;
    await worker.idle();
    expect((await driveUntil(a, db, id)).status).toBe('succeeded');
    expect(stepBodies.get(`prompt-${id}`)).toBe(1);
  });
});

describe('nothing is stranded at a park (items 1, 2, 5)', () => {
  it('a signal sent while the wait statement waits for the row lock wakes the run (and values taken before the wait survive)', async () => {
    const id = await start('wait');
    const hold = freezeAt((i) => i.point === 'before-write' && i.detail === 'wait-for-signal');
    const attempt = a.get(DurableWorker).tick();
    await hold.reached;
    // The signal commits after the wait statement's snapshot but before it gets the run row.
    const sender = new Client({ connectionString: db.url });
    await sender.connect();
    await sender.query('begin');
    await sender.query(`select id from ai_runs where id = $1 for update`, [id]);
    hold.release();
    await sleep(200);
    await sender.query(
      `insert into ai_signals (run_id, name, payload) values ($1, 'go', '{"n":1}');
       update ai_runs set updated_at = now() where id = $1`.replace(/\$1/g, `'${id}'`),
    );
    await sender.query('commit');
    await sender.end();
    await attempt;
    await a.get(DurableWorker).idle();
    const view = await settle(a, id);
    expect(view.status).toBe('succeeded');
    expect((view.output as { payload: unknown }).payload).toEqual({ n: 1 });
    const uuids = await db.query(
      `select output from ai_checkpoints where run_id = $1 and step_name = '$uuid' order by step_index`,
      [id],
    );
    expect(uuids[0].output).toBe((view.output as { before: string }).before);
  });

  it('a signal sent between looking for it and parking is consumed (RunRepository.signal racing the park)', async () => {
    const id = await start('wait');
    const hold = freezeAt((i) => i.point === 'before-write' && i.detail === 'wait-for-signal');
    const attempt = a.get(DurableWorker).tick();
    await hold.reached;
    await a.get(RunRepository).signal(id, 'go', { n: 2 });
    hold.release();
    await attempt;
    await a.get(DurableWorker).idle();
    expect((await settle(a, id)).output).toMatchObject({ payload: { n: 2 } });
  });

  it('a cancel requested while a wait parks cancels the run instead of parking it forever', async () => {
    const id = await start('wait');
    const hold = freezeAt((i) => i.point === 'before-write' && i.detail === 'wait-for-signal');
    const attempt = a.get(DurableWorker).tick();
    await hold.reached;
    await a.get(RunRepository).cancel(id, 'changed my mind');
    hold.release();
    await attempt;
    await a.get(DurableWorker).idle();
    expect((await settle(a, id)).status).toBe('cancelled');
  });

  /**
   * Worker A freezes after reserving the run's command (its outcome now hidden), B takes the run over
   * and is held just before `write`; an operator resolves the command meanwhile; then both go on.
   */
  async function resolveWhileClaimed(shape: string, write: string, result: unknown) {
    const id = await start(shape);
    const crash = freezeAt(
      (i) => i.workerId === 'worker-a' && i.point === 'after-write' && i.detail === 'tool.command_reserved',
    );
    const zombie = a.get(DurableWorker).tick();
    await crash.reached;
    await takeOver(id); // the command is now in doubt
    const held = freezeAt(
      (i) => i.workerId === 'worker-b' && i.point === 'before-write' && i.detail === write,
    );
    const attempt = b.get(DurableWorker).tick();
    await held.reached;
    const [cmd] = await b.get(CommandGateway).listForRun(id);
    expect(cmd.status).toBe('in_doubt');
    await b.get(RunRepository).resolveCommand(cmd.idempotencyKey, { outcome: 'succeeded', result }, 'oncall');
    held.release();
    await attempt;
    await b.get(DurableWorker).idle();
    crash.release();
    await zombie;
    return { view: await settle(b, id), key: cmd.idempotencyKey, id };
  }

  it('an operator resolving a manual in-doubt command while the run is claimed is not lost at the park', async () => {
    const { view } = await resolveWhileClaimed('manual', 'park', { paid: 5 });
    expect(view).toMatchObject({ status: 'succeeded', output: { paid: 5 } });
  });

  it('an approval given while the run is claimed for another reason is not lost at the park', async () => {
    const id = await start('approval');
    await driveUntil(a, db, id, ['waiting']); // parked for approval
    await a.get(RunRepository).signal(id, 'nudge', null); // wakes it: claimed again, parks again
    const park = freezeAt((i) => i.point === 'before-write' && i.detail === 'park');
    await db.query(`update ai_runs set available_at = now() where id = $1`, [id]);
    const attempt = a.get(DurableWorker).tick();
    await park.reached;
    const [cmd] = await a.get(CommandGateway).listForRun(id);
    await a.get(RunRepository).approve(id, cmd.idempotencyKey, { by: 'oncall' });
    park.release();
    await attempt;
    await a.get(DurableWorker).idle();
    expect(await settle(a, id)).toMatchObject({ status: 'succeeded', output: { paid: { paid: 9 } } });
  });

  it('a command an operator settled while the run was reserving it is not sent again (the reserve result is read)', async () => {
    const { view, key, id } = await resolveWhileClaimed('keyed', 'tool.command_reserved', { paid: 70 });
    expect(view).toMatchObject({ status: 'succeeded', output: { paid: 70 } });
    expect(effects.get(key)).toBeUndefined();
    const [after] = await b.get(CommandGateway).listForRun(id);
    expect(after).toMatchObject({ status: 'succeeded', result: { paid: 70 } });
  });

  it('cancel() racing claims never throws a raw check violation and is never lost', async () => {
    const runs = a.get(RunRepository);
    for (let i = 0; i < 20; i++) {
      // Held from its first claim on, by whichever claim: the previous run's end nudges a background
      // tick that may claim this run before start() returns, so the hold goes in before the run
      // exists (every other run is settled).
      const known = new Set((await db.query(`select id from ai_runs`)).map((r: { id: string }) => r.id));
      const hold = freezeAt((p) => p.point === 'after-claim' && !known.has(p.runId));
      const id = await start('think');
      const [, cancelled] = await Promise.all([a.get(DurableWorker).tick(), runs.cancel(id, 'race')]);
      expect(['pending', 'running', 'cancelled']).toContain(cancelled.status);
      hold.release();
      await a.get(DurableWorker).idle();
      expect((await settle(a, id)).status).toBe('cancelled');
    }
  });
});
