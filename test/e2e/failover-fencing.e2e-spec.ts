import { INestApplication, Injectable } from '@nestjs/common';
import {
  CommandContext,
  CommandLookup,
  DurableStep,
  DurableWorkflow,
  IdempotentCommand,
  RunContext,
  RunRepository,
} from '../../src';
import { DurableWorker } from '../../src/engine/worker.service';
import { Reconciler } from '../../src/maintenance/reconciler.service';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil, gate } from '../helpers/drive';

/**
 * Issue 23, items 2-4, in one process: what the engine does when a run's row says it was created or
 * last claimed on another WAL timeline than the server's (what a promotion leaves behind; the real
 * failover is test/e2e/failover.e2e-spec.ts). The rows are moved to an older timeline with SQL, the one
 * thing this shared server cannot do itself.
 */
const target = {
  applied: new Map<string, unknown>(),
  sends: [] as string[],
  lookups: [] as string[],
  fences: [] as CommandContext['fence'][],
};
let hold: ReturnType<typeof gate> | null = null;

/** The target applies a charge under the key it was sent with. */
function send(args: { amount: number; item?: string }, ctx: CommandContext) {
  target.sends.push(ctx.idempotencyKey);
  target.fences.push(ctx.fence);
  const result = { chargeId: `ch_${target.sends.length}`, ...args };
  target.applied.set(ctx.idempotencyKey, result);
  return result;
}

@Injectable()
class Gateway implements CommandLookup {
  @IdempotentCommand({ name: 'fo_charge', inDoubt: 'lookup' })
  async charge(args: { amount: number }, ctx?: CommandContext) {
    return send(args, ctx!);
  }
  @IdempotentCommand({ name: 'fo_manual', inDoubt: 'manual' })
  async manual(args: { amount: number }, ctx?: CommandContext) {
    target.sends.push(ctx!.idempotencyKey);
    return { paid: args.amount };
  }
  @IdempotentCommand({ name: 'fo_keyed', inDoubt: 'retry-with-key' })
  async keyed(args: { amount: number }, ctx?: CommandContext) {
    target.sends.push(ctx!.idempotencyKey);
    return { keyed: args.amount };
  }
  @IdempotentCommand({ name: 'fo_approved', inDoubt: 'lookup', requiresApproval: true })
  async approved(args: { amount: number }, ctx?: CommandContext) {
    return send(args, ctx!);
  }
  @IdempotentCommand({ name: 'fo_approved_manual', inDoubt: 'manual', requiresApproval: true })
  async approvedManual(args: { amount: number }, ctx?: CommandContext) {
    return send(args, ctx!);
  }
  /** Keyed by its position in the run (the default). */
  @IdempotentCommand({ name: 'fo_item', inDoubt: 'lookup' })
  async item(args: { item: string }, ctx?: CommandContext) {
    return send({ amount: args.item.charCodeAt(0), item: args.item }, ctx!);
  }
  /** Keyed by what it is: the item. */
  @IdempotentCommand({
    name: 'fo_item_keyed',
    inDoubt: 'lookup',
    key: (a: { item: string }) => `item-${a.item}`,
  })
  async itemKeyed(args: { item: string }, ctx?: CommandContext) {
    return send({ amount: args.item.charCodeAt(0), item: args.item }, ctx!);
  }
  async lookupCommand(_command: string, key: string) {
    target.lookups.push(key);
    return target.applied.has(key)
      ? { found: true as const, result: target.applied.get(key) }
      : { found: false as const };
  }
}

/** How long each item's step takes (ms): which branch of a fan-out reaches its command first. */
const itemDelays: Record<string, number> = {};

@Injectable()
class Steps {
  @DurableStep({ name: 'fo_slow', kind: 'tool' })
  async slow(n: number) {
    if (hold) await hold.promise;
    return n * 2;
  }
  @DurableStep({ name: 'fo_prepare', kind: 'tool' })
  async prepare(item: string) {
    await new Promise((r) => setTimeout(r, itemDelays[item] ?? 0));
    return item;
  }
}

@DurableWorkflow('fo-approve')
class ApproveFlow {
  constructor(private readonly gw: Gateway) {}
  async run(input: { amount: number; manual?: boolean }) {
    return input.manual ? this.gw.approvedManual(input) : this.gw.approved(input);
  }
}

/** Each item: a step, then a command; which command comes first depends on the steps' timing. */
@DurableWorkflow('fo-fan')
class FanFlow {
  constructor(
    private readonly steps: Steps,
    private readonly gw: Gateway,
  ) {}
  async run(input: { keyed: boolean; items: string[]; sameKey?: boolean }) {
    const one = async (item: string) => {
      const prepared = await this.steps.prepare(item);
      const args = { item: input.sameKey ? 'x' : prepared };
      return input.keyed ? this.gw.itemKeyed(args) : this.gw.item(args);
    };
    return Promise.all(input.items.map(one));
  }
}

@DurableWorkflow('fo-charge')
class ChargeFlow {
  constructor(private readonly gw: Gateway) {}
  async run(input: { amount: number }) {
    return this.gw.charge({ amount: input.amount });
  }
}

@DurableWorkflow('fo-policies')
class PoliciesFlow {
  constructor(private readonly gw: Gateway) {}
  async run(input: { amount: number }) {
    const keyed = await this.gw.keyed({ amount: input.amount });
    const manual = await this.gw.manual({ amount: input.amount });
    return { keyed, manual };
  }
}

@DurableWorkflow('fo-slow')
class SlowFlow {
  constructor(
    private readonly steps: Steps,
    private readonly gw: Gateway,
  ) {}
  async run(input: { n: number }, _ctx: RunContext) {
    const doubled = await this.steps.slow(input.n);
    return { doubled, charged: await this.gw.charge({ amount: doubled }) };
  }
}

describe('fencing across a failover (timeline in the fence, lookup before the first send)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let runs: RunRepository;
  const older = (id: string) => db.query(`update ai_runs set timeline = timeline - 1 where id = $1`, [id]);
  const row = async (id: string) =>
    (await db.query(`select timeline, lookup_first, epoch::int from ai_runs where id = $1`, [id]))[0];
  const serverTimeline = async () =>
    (
      await db.query(`select ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int as t`)
    )[0].t;

  beforeAll(async () => {
    db = await createTestDatabase('failover_fencing');
    app = await bootApp(db.url, [Gateway, Steps, ChargeFlow, PoliciesFlow, SlowFlow, ApproveFlow, FanFlow]);
    runs = app.get(RunRepository);
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });
  beforeEach(() => {
    target.applied.clear();
    target.sends = [];
    target.lookups = [];
    target.fences = [];
  });

  it('a new run on an unchanged timeline sends at once; the fence carries (timeline, epoch)', async () => {
    const { run } = await runs.start('fo-charge', { amount: 5 });
    expect((await row(run.id)).timeline).toBe(await serverTimeline());
    expect((await driveUntil(app, db, run.id)).status).toBe('succeeded');
    expect(target.lookups).toEqual([]);
    expect(target.sends).toHaveLength(1);
    expect(target.fences[0]).toMatchObject({ runId: run.id, epoch: 1, timeline: await serverTimeline() });
    expect((await row(run.id)).lookup_first).toBe(false);
  });

  it('a run from an older timeline asks the target before its first send: found, it is recorded and not sent', async () => {
    const { run } = await runs.start('fo-charge', { amount: 7 });
    await older(run.id);
    // What the old primary's lost commits had sent: the target applied the key.
    const key = `run_${run.id}:step_0:fo_charge`;
    target.applied.set(key, { chargeId: 'ch_before_failover', amount: 7 });
    const done = await driveUntil(app, db, run.id);
    expect(done.output).toEqual({ chargeId: 'ch_before_failover', amount: 7 });
    expect(target.lookups).toEqual([key]);
    expect(target.sends).toEqual([]);
    expect(await row(run.id)).toMatchObject({ lookup_first: true, timeline: await serverTimeline() });
    const resolved = (await runs.events(run.id)).filter((e) => e.type === 'command.resolved');
    expect(resolved.map((e) => e.payload)).toEqual([
      { by: 'lookup', found: true, key, name: 'fo_charge', step: 0 },
    ]);
  });

  it('not found, it is sent once with the same key', async () => {
    const { run } = await runs.start('fo-charge', { amount: 9 });
    await older(run.id);
    const done = await driveUntil(app, db, run.id);
    expect(done.status).toBe('succeeded');
    expect(target.lookups).toHaveLength(1);
    expect(target.sends).toEqual(target.lookups);
  });

  it('retry-with-key sends the same key without asking; manual parks for an operator before any send', async () => {
    const { run } = await runs.start('fo-policies', { amount: 3 });
    await older(run.id);
    const parked = await driveUntil(app, db, run.id, ['waiting']);
    expect(parked.parkedReason).toMatch(/may have been sent before a failover/);
    expect(target.lookups).toEqual([]);
    expect(target.sends).toEqual([`run_${run.id}:step_0:fo_keyed`]); // manual's body never ran
    const manualKey = `run_${run.id}:step_1:fo_manual`;
    const [cmd] = (await db.query(`select status from ai_commands where idempotency_key = $1`, [
      manualKey,
    ])) as {
      status: string;
    }[];
    expect(cmd.status).toBe('in_doubt');
    await runs.resolveCommand(manualKey, { outcome: 'succeeded', result: { paid: 3, by: 'ops' } });
    const done = await driveUntil(app, db, run.id);
    expect(done.output).toEqual({ keyed: { keyed: 3 }, manual: { paid: 3, by: 'ops' } });
    expect(target.sends).toHaveLength(1);
  });

  it('a worker whose claim is on an older timeline writes nothing more; the next claim replays and looks up first', async () => {
    hold = gate();
    const { run } = await runs.start('fo-slow', { n: 21 });
    const worker = app.get(DurableWorker);
    await worker.tick(); // claimed (epoch 1), the step's body waits on the hold
    await new Promise((r) => setTimeout(r, 100));
    expect((await row(run.id)).epoch).toBe(1);
    // The failover: the claim was made on a timeline the server left.
    await older(run.id);
    hold.open();
    hold = null;
    await worker.idle();
    // Its step commit failed the fence: no checkpoint, nothing sent, the run still holds the old claim.
    expect(await db.query(`select step_name from ai_checkpoints where run_id = $1`, [run.id])).toEqual([]);
    expect(target.sends).toEqual([]);
    expect((await runs.get(run.id))!.status).toBe('running');
    // Its lease runs out (made so here); the reconciler recovers the run, the next claim replays it.
    await db.query(`update ai_runs set lease_expires_at = now() - interval '1 second' where id = $1`, [
      run.id,
    ]);
    await app.get(Reconciler).sweep();
    const done = await driveUntil(app, db, run.id);
    expect(done.output).toMatchObject({ doubled: 42, charged: { amount: 42 } });
    expect(await row(run.id)).toMatchObject({
      epoch: 2,
      lookup_first: true,
      timeline: await serverTimeline(),
    });
    expect(target.lookups).toEqual([`run_${run.id}:step_1:fo_charge`]);
    expect(target.sends).toEqual(target.lookups);
    const lost = (await runs.events(run.id)).filter((e) => e.type === 'run.reconciled');
    expect(lost).toHaveLength(1);
  });

  it('an approved command is looked up before its send after a failover (its send may be what was lost)', async () => {
    const { run } = await runs.start('fo-approve', { amount: 4 });
    expect((await driveUntil(app, db, run.id, ['waiting'])).parkedReason).toMatch(/awaiting approval/);
    const key = `run_${run.id}:step_0:fo_approved`;
    await runs.approve(run.id, key, { by: 'ops' });
    // The old primary had sent it after the approval; the commits saying so were lost with it.
    await older(run.id);
    target.applied.set(key, { chargeId: 'ch_before_failover', amount: 4 });
    const done = await driveUntil(app, db, run.id);
    expect(done.output).toEqual({ chargeId: 'ch_before_failover', amount: 4 });
    expect(target.lookups).toEqual([key]);
    expect(target.sends).toEqual([]);
  });

  it('an approved manual command parks in doubt after a failover instead of sending', async () => {
    const { run } = await runs.start('fo-approve', { amount: 6, manual: true });
    await driveUntil(app, db, run.id, ['waiting']);
    const key = `run_${run.id}:step_0:fo_approved_manual`;
    await runs.approve(run.id, key, { by: 'ops' });
    await older(run.id);
    const parked = await driveUntil(app, db, run.id, ['waiting']);
    expect(parked.parkedReason).toMatch(/may have been sent before a failover/);
    const [cmd] = await db.query(`select status from ai_commands where idempotency_key = $1`, [key]);
    expect(cmd.status).toBe('in_doubt');
    expect(target.sends).toEqual([]);
    await runs.resolveCommand(key, { outcome: 'retry' });
    expect(await driveUntil(app, db, run.id)).toMatchObject({ status: 'succeeded', error: null });
    expect(target.sends).toEqual([key]);
  });

  /**
   * The old primary ran the fan-out with item a's step first: a's command took position 2 and b's 3, both
   * were sent, and those commits were lost. The run runs again with b's step first.
   */
  const fanAfterFailover = async (keyed: boolean) => {
    const { run } = await runs.start('fo-fan', { keyed, items: ['a', 'b'] });
    await older(run.id);
    const name = keyed ? 'fo_item_keyed' : 'fo_item';
    const sentBefore = keyed
      ? { a: `run_${run.id}:key_item-a:${name}`, b: `run_${run.id}:key_item-b:${name}` }
      : { a: `run_${run.id}:step_2:${name}`, b: `run_${run.id}:step_3:${name}` };
    target.applied.set(sentBefore.a, { chargeId: 'ch_a', amount: 97, item: 'a' });
    target.applied.set(sentBefore.b, { chargeId: 'ch_b', amount: 98, item: 'b' });
    Object.assign(itemDelays, { a: 300, b: 0 });
    try {
      return { done: await driveUntil(app, db, run.id), sentBefore };
    } finally {
      Object.assign(itemDelays, { a: 0, b: 0 });
    }
  };

  it('a command keyed by position in a fan-out can be numbered anew after a lost suffix (the hazard)', async () => {
    const { done, sentBefore } = await fanAfterFailover(false);
    // b's command now took position 2: the lookup found what was sent for a there, and a's took 3.
    expect(done.output).toEqual([
      { chargeId: 'ch_b', amount: 98, item: 'b' },
      { chargeId: 'ch_a', amount: 97, item: 'a' },
    ]);
    expect(target.lookups.sort()).toEqual([sentBefore.a, sentBefore.b].sort());
  });

  it('with a key of its own (`key`), each command is found by what it is, in any order', async () => {
    const { done, sentBefore } = await fanAfterFailover(true);
    expect(done.output).toEqual([
      { chargeId: 'ch_a', amount: 97, item: 'a' },
      { chargeId: 'ch_b', amount: 98, item: 'b' },
    ]);
    expect(target.lookups.sort()).toEqual([sentBefore.a, sentBefore.b].sort());
    expect(target.sends).toEqual([]);
  });

  it('a key of its own is unique in its run and checked: a second use or a bad value fails the run', async () => {
    const twice = await runs.start('fo-fan', { keyed: true, items: ['a', 'b'], sameKey: true });
    const failed = await driveUntil(app, db, twice.run.id);
    expect(failed.status).toBe('failed');
    expect(failed.error).toMatchObject({
      code: 'DURABLE_MISUSE',
      message: expect.stringMatching(/key "item-x" is already used at step \d of this run/),
    });
    expect(target.sends.length).toBeLessThanOrEqual(1); // the first call at most, never the second
    const bad = await runs.start('fo-fan', { keyed: true, items: ['a b'] });
    const refused = await driveUntil(app, db, bad.run.id);
    expect(refused.status).toBe('failed');
    expect((refused.error as { message: string }).message).toMatch(/key must return 1-200 letters/);
    expect(() =>
      IdempotentCommand({ name: 'x', inDoubt: 'lookup', key: 'item' as never })(class X {}.prototype, 'm', {
        value: () => undefined,
      }),
    ).toThrow(/key must be a function of the arguments/);
  });
});
