/**
 * Time travel (issue 49): RunRepository.fork starts a run that inherits the original's record before a
 * step and executes from there. Counted at loopback servers: the model (each turn it is asked) and the
 * vendor (each request and each effect by idempotency key). What a fork inherits is never asked or sent
 * again; what it runs itself reaches the vendor under keys of its own; the original is left as it was,
 * or cancelled and fenced in the fork's statement.
 */
import { INestApplication } from '@nestjs/common';
import { ForkRefusedError, InvalidArgumentError, RunRepository } from '../../src';
import { DurableWorker } from '../../src/engine/worker.service';
import {
  AgentV1,
  AgentV2,
  DoubtWorkflow,
  FanoutWorkflow,
  forkEnv,
  FORK_PROVIDERS,
} from '../fixtures/fork-agent-app';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil, gate } from '../helpers/drive';
import { FakeTarget, startFakeTarget } from '../helpers/fake-target';
import { waitFor } from '../helpers/processes';
import { ModelServer, startModelServer } from '../helpers/model-server';

/** The keys the vendor saw for a run id (the key names its run: `run_<id>:step_<n>:act`). */
const keysOf = (vendor: FakeTarget, runId: string) =>
  Object.keys(vendor.requests())
    .filter((k) => k.startsWith(`run_${runId}:`))
    .sort();

describe('RunRepository.fork', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let runs: RunRepository;
  let model: ModelServer;
  let vendor: FakeTarget;

  beforeAll(async () => {
    db = await createTestDatabase('fork');
    model = await startModelServer();
    vendor = await startFakeTarget({ honoursKeys: true });
    forkEnv.modelUrl = model.url;
    forkEnv.vendorUrl = vendor.url;
    app = await bootApp(db.url, FORK_PROVIDERS, { worker: { concurrency: 4 } });
    runs = app.get(RunRepository);
  });
  afterAll(async () => {
    await app?.get(DurableWorker).idle();
    await app?.close();
    await model?.close();
    await vendor?.close();
    await db?.drop();
  });

  /** An agent run of version 1 that failed at step 7 (the broken prompt). */
  async function failedAtSeven(): Promise<string> {
    const { run } = await runs.start(AgentV1, { task: 'refund order 7' });
    const ended = await driveUntil(app, db, run.id);
    expect(ended.status).toBe('failed');
    expect(ended.error?.message).toContain('garbage at step 7');
    return run.id;
  }

  it('a run that failed at step 7, forked from 7 under the fixed version: no turn or command of 1-6 again', async () => {
    const id = await failedAtSeven();
    const askedBefore = model.asked.filter((a) => a.run === id).map((a) => a.step);
    expect(askedBefore).toEqual([1, 3, 5, 7]);
    expect(keysOf(vendor, id)).toEqual([
      `run_${id}:step_2:act`,
      `run_${id}:step_4:act`,
      `run_${id}:step_6:act`,
    ]);

    const forked = await runs.fork(id, { fromStep: 7, version: 2 });
    expect(forked.created).toBe(true);
    expect(forked.inherited).toBe(7); // the conversation id and steps 1-6
    expect(forked.run.forkedFrom).toEqual({ runId: id, fromStep: 7 });
    expect(forked.run.version).toBe(2);
    const fork = forked.run.id;
    const done = await driveUntil(app, db, fork);
    expect(done.status).toBe('succeeded');

    // 0 model calls and 0 commands repeated for steps 1-6: the fork asked the model for 7 and 9 only ...
    expect(model.asked.filter((a) => a.run === fork).map((a) => a.step)).toEqual([7, 9]);
    // ... and sent step 8 only, under its own key; the original's three charges happened once each.
    expect(keysOf(vendor, fork)).toEqual([`run_${fork}:step_8:act`]);
    const effects = vendor.effects();
    const requests = vendor.requests();
    for (const s of [2, 4, 6]) {
      expect(effects[`run_${id}:step_${s}:act`]).toBe(1);
      expect(requests[`run_${id}:step_${s}:act`]).toBe(1);
    }
    expect(effects[`run_${fork}:step_8:act`]).toBe(1);
    // It continued the original's conversation: the same id, the same results up to step 6.
    const out = (await runs.result(fork)) as { conv: string; trail: string[] };
    const orig = await runs.checkpoints(id);
    expect(out.conv).toBe(orig.find((c) => c.stepIndex === 0)!.output);
    expect(out.trail).toHaveLength(9);
    // Linked both ways; the original untouched but for its event.
    const original = (await runs.get(id))!;
    expect(original.status).toBe('failed');
    expect((await runs.events(id)).filter((e) => e.type === 'run.forked').map((e) => e.payload)).toEqual([
      { fork, fromStep: 7, original: 'leave' },
    ]);
    expect((await runs.events(fork))[0]).toMatchObject({
      type: 'run.created',
      payload: { forkedFrom: id, fromStep: 7, inherited: 7 },
    });
    expect(await db.query(`select count(*)::int as n from ai_checkpoints where run_id = $1`, [id])).toEqual([
      { n: 7 },
    ]);
  });

  it('a fork from step 3 with an edited step-2 result runs 3-9 again, its commands under new keys', async () => {
    const { run } = await runs.start(AgentV2, { task: 'refund order 8' });
    expect((await driveUntil(app, db, run.id)).status).toBe('succeeded');
    const id = run.id;
    const before = vendor.effects();

    const forked = await runs.fork(id, {
      fromStep: 3,
      editResult: { step: 2, value: { receipt: 'EDITED' } },
    });
    const fork = forked.run.id;
    expect(forked.inherited).toBe(3);
    expect((await driveUntil(app, db, fork)).status).toBe('succeeded');

    // Steps 3-9 ran again: turns 3, 5, 7, 9 asked (3 from the edited result), commands 4, 6, 8 sent.
    const asked = model.asked.filter((a) => a.run === fork);
    expect(asked.map((a) => a.step)).toEqual([3, 5, 7, 9]);
    expect(asked[0].prompt).toBe('step 3 after EDITED');
    expect(keysOf(vendor, fork)).toEqual([4, 6, 8].map((s) => `run_${fork}:step_${s}:act`));
    for (const s of [4, 6, 8]) expect(vendor.effects()[`run_${fork}:step_${s}:act`]).toBe(1);
    // The original's effects stay once: none of its keys was sent again.
    for (const s of [2, 4, 6, 8]) {
      expect(vendor.effects()[`run_${id}:step_${s}:act`]).toBe(1);
      expect(before[`run_${id}:step_${s}:act`]).toBe(1);
      expect(vendor.requests()[`run_${id}:step_${s}:act`]).toBe(1);
    }
    const out = (await runs.result(fork)) as { trail: string[] };
    expect(out.trail[1]).toBe('EDITED');
    const cp = (await runs.checkpoints(fork)).find((c) => c.stepIndex === 2)!;
    expect(cp.output).toEqual({ status: 'succeeded', result: { receipt: 'EDITED' } });
    expect(cp.meta).toEqual({ edited: true });
  });

  it("keepKeys: the fork sends the original's keys, so a deduplicating vendor answers with the original's effects", async () => {
    const { run } = await runs.start(AgentV2, { task: 'refund order 12' });
    expect((await driveUntil(app, db, run.id)).status).toBe('succeeded');
    const id = run.id;
    const original = (await runs.result(id)) as { trail: string[] };
    const forked = await runs.fork(id, { fromStep: 3, keepKeys: true });
    const fork = forked.run.id;
    expect((await driveUntil(app, db, fork)).status).toBe('succeeded');
    // Turns 3-9 asked again, but commands 4, 6, 8 went out under the original's keys: answered from its effects.
    expect(model.asked.filter((a) => a.run === fork).map((a) => a.step)).toEqual([3, 5, 7, 9]);
    expect(keysOf(vendor, fork)).toEqual([]);
    for (const s of [4, 6, 8]) {
      expect(vendor.requests()[`run_${id}:step_${s}:act`]).toBe(2);
      expect(vendor.effects()[`run_${id}:step_${s}:act`]).toBe(1);
    }
    expect(((await runs.result(fork)) as { trail: string[] }).trail).toEqual(original.trail);
    // Its rows keep keys of its own; a fork of it that keeps keys sends the same original's keys.
    const rows = await db.query(
      `select idempotency_key from ai_commands where run_id = $1 order by step_index`,
      [fork],
    );
    expect(rows.map((r) => r.idempotency_key)).toEqual([4, 6, 8].map((s) => `run_${fork}:step_${s}:act`));
    const second = await runs.fork(fork, { fromStep: 7, keepKeys: true });
    expect((await driveUntil(app, db, second.run.id)).status).toBe('succeeded');
    expect(vendor.requests()[`run_${id}:step_8:act`]).toBe(3);
    expect(vendor.effects()[`run_${id}:step_8:act`]).toBe(1);
    await expect(runs.fork(id, { fromStep: 3, keepKeys: 'yes' as never })).rejects.toMatchObject({
      field: 'keepKeys',
    });
  });

  it('a fork of a fork: it inherits from its own original, and links to it', async () => {
    const id = await failedAtSeven();
    const first = await runs.fork(id, { fromStep: 7, version: 2 });
    expect((await driveUntil(app, db, first.run.id)).status).toBe('succeeded');
    const second = await runs.fork(first.run.id, { fromStep: 9 });
    expect(second.run.forkedFrom).toEqual({ runId: first.run.id, fromStep: 9 });
    expect(second.inherited).toBe(9);
    expect((await driveUntil(app, db, second.run.id)).status).toBe('succeeded');
    expect(model.asked.filter((a) => a.run === second.run.id).map((a) => a.step)).toEqual([9]);
    expect(keysOf(vendor, second.run.id)).toEqual([]);
  });

  it('a fork of a running original with original: cancel leaves exactly one of them running', async () => {
    const held = gate();
    const entered = gate();
    forkEnv.beforeThink = async (step) => {
      if (step !== 5) return;
      entered.open();
      await held.promise;
    };
    try {
      const { run } = await runs.start(AgentV2, { task: 'refund order 9' });
      const worker = app.get(DurableWorker);
      void worker.tick();
      await entered.promise; // the original is in step 5's model turn, running
      const id = run.id;
      const running = async () =>
        (await db.query(`select id from ai_runs where id = any($1::uuid[]) and status = 'running'`, [[id]]))
          .length;
      expect(await running()).toBe(1);
      await expect(runs.fork(id, { fromStep: 5 })).rejects.toMatchObject({ field: 'original' });
      const before = (await runs.get(id))!;

      const forked = await runs.fork(id, { fromStep: 5, original: 'cancel' });
      const fork = forked.run.id;
      const count = async () =>
        (
          await db.query(
            `select count(*)::int as n from ai_runs where id = any($1::uuid[]) and status = 'running'`,
            [[id, fork]],
          )
        )[0].n as number;
      const original = (await runs.get(id))!;
      expect(original.status).toBe('cancelled');
      expect(original.epoch).toBe(before.epoch + 1); // the old owner is fenced out
      expect(forked.run.status).toBe('pending');
      // The fork is due when the old owner's lease ends, when nothing it started can act any more.
      expect(forked.run.availableAt.getTime()).toBeGreaterThanOrEqual(before.leaseExpiresAt!.getTime());
      expect(await count()).toBe(0);
      held.open(); // the old owner's turn returns: its commit finds the lease gone and writes nothing
      await worker.idle();
      expect(await count()).toBe(0);
      expect((await runs.checkpoints(id)).map((c) => c.stepIndex)).toEqual([0, 1, 2, 3, 4]);
      expect((await runs.events(id)).map((e) => e.type)).toEqual(
        expect.arrayContaining(['run.forked', 'run.cancelled']),
      );

      // The fork runs alone from step 5 and succeeds (its due time brought forward: the lease is 30 s).
      await db.query(`update ai_runs set available_at = now() where id = $1`, [fork]);
      let most = 0;
      forkEnv.beforeThink = async () => {
        most = Math.max(most, await count());
      };
      expect((await driveUntil(app, db, fork)).status).toBe('succeeded');
      expect(most).toBe(1);
      expect((await runs.get(id))!.status).toBe('cancelled');
      expect(keysOf(vendor, fork)).toEqual([6, 8].map((s) => `run_${fork}:step_${s}:act`));
      expect(keysOf(vendor, id)).toEqual([2, 4].map((s) => `run_${id}:step_${s}:act`));
    } finally {
      forkEnv.beforeThink = undefined;
      held.open();
    }
  });

  it('refuses a fork while a command before the step is in doubt, naming it; a fork from it is allowed', async () => {
    const { run } = await runs.start(DoubtWorkflow, { task: 'settle' });
    await waitFor(
      async () => {
        await app.get(DurableWorker).tick();
        await app.get(DurableWorker).idle();
        return !!(await runs.get(run.id))!.parkedReason;
      },
      15_000,
      'the run to park on its command in doubt',
    );
    const key = `run_${run.id}:step_1:settle`;
    const err = await runs.fork(run.id, { fromStep: 2, original: 'leave' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ForkRefusedError);
    expect(err).toMatchObject({ code: 'DURABLE_FORK_REFUSED', reason: 'unsettled-command', commandKey: key });
    expect((err as Error).message).toContain(key);
    expect(await db.query(`select count(*)::int as n from ai_runs where forked_from = $1`, [run.id])).toEqual(
      [{ n: 0 }],
    );
    // From the command's own step the fork sends its own command (nothing inherited is in doubt).
    const fork = await runs.fork(run.id, { fromStep: 1, original: 'leave' });
    expect(fork.inherited).toBe(1);
  });

  it('refuses a cut through a Promise.all, and names the steps it may fork from', async () => {
    const { run } = await runs.start(FanoutWorkflow, { task: 'fan' });
    expect((await driveUntil(app, db, run.id)).status).toBe('succeeded');
    // slow (step 0) was asked first and delivered after fast (step 1).
    const err = await runs.fork(run.id, { fromStep: 1 }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'DURABLE_FORK_REFUSED', reason: 'concurrent', position: 0 });
    expect((err as Error).message).toContain('Fork from step 0 or 2');
    forkEnv.fanout = [];
    const fork = await runs.fork(run.id, { fromStep: 2 });
    expect((await driveUntil(app, db, fork.run.id)).status).toBe('succeeded');
    expect(forkEnv.fanout).toEqual([]);
  });

  it('checks its arguments before anything is written', async () => {
    const id = await failedAtSeven();
    const bad = (opts: object) => runs.fork(id, opts as never).catch((e: unknown) => e);
    expect(await bad({ fromStep: -1 })).toMatchObject({ field: 'fromStep' });
    expect(await bad({ fromStep: 11 })).toMatchObject({ field: 'fromStep' });
    expect(await bad({ fromStep: 7, original: 'stop' })).toMatchObject({ field: 'original' });
    expect(await bad({ fromStep: 7, original: 'cancel' })).toMatchObject({ field: 'original' });
    expect(await bad({ fromStep: 7, version: 3 })).toMatchObject({ field: 'version' });
    expect(await bad({ fromStep: 7, editResult: { step: 4, value: 1 } })).toMatchObject({
      field: 'editResult.step',
    });
    expect(await bad({ fromStep: 1, editResult: { step: 0, value: 'x' } })).toMatchObject({
      field: 'editResult.step',
    });
    expect(await bad({ fromStep: 7, input: { when: () => 1 } })).toBeInstanceOf(Error);
    await expect(runs.fork('nope', { fromStep: 0 })).rejects.toBeInstanceOf(InvalidArgumentError);
    expect(await db.query(`select count(*)::int as n from ai_runs where forked_from = $1`, [id])).toEqual([
      { n: 0 },
    ]);
    // An idempotency key makes a repeated fork the same fork.
    const a = await runs.fork(id, { fromStep: 7, version: 2, idempotencyKey: `fork-${id}` });
    const b = await runs.fork(id, { fromStep: 7, version: 2, idempotencyKey: `fork-${id}` });
    expect([a.created, b.created, b.run.id]).toEqual([true, false, a.run.id]);
    await expect(runs.fork(id, { fromStep: 5, idempotencyKey: `fork-${id}` })).rejects.toMatchObject({
      code: 'DURABLE_IDEMPOTENCY_CONFLICT',
    });
  });
});
