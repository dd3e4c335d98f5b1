import { INestApplication } from '@nestjs/common';
import {
  ChildRunError,
  DurableStep,
  DurableWorkflow,
  NonRetryableError,
  RunContext,
  RunRepository,
} from '../../src';
import { DurableWorker } from '../../src/engine/worker.service';
import { Reconciler } from '../../src/maintenance/reconciler.service';
import { Client } from 'pg';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { waitFor } from '../helpers/processes';

@DurableWorkflow('child-square')
class Square {
  async run(input: { n: number; fail?: boolean }): Promise<{ sq: number }> {
    if (input.fail) throw new NonRetryableError(`no square for ${input.n}`);
    return { sq: input.n * input.n };
  }
}

@DurableWorkflow('child-forever')
class Forever {
  async run(_input: { tag: string }, ctx: RunContext) {
    return ctx.waitForSignal('never');
  }
}

class Tally {
  @DurableStep()
  async sum(values: number[]): Promise<number> {
    return values.reduce((a, b) => a + b, 0);
  }
}

@DurableWorkflow('child-fanout')
class FanOut {
  constructor(private readonly tally: Tally) {}
  async run(input: { ns: number[] }, ctx: RunContext) {
    const outs = await Promise.all(input.ns.map((n) => ctx.child(Square, { n })));
    return { total: await this.tally.sum(outs.map((o) => o.sq)), each: outs.map((o) => o.sq) };
  }
}

@DurableWorkflow('child-catcher')
class Catcher {
  async run(input: { n: number }, ctx: RunContext) {
    try {
      return await ctx.child(Square, { n: input.n, fail: true });
    } catch (err) {
      if (!(err instanceof ChildRunError)) throw err;
      return { caught: err.childStatus, message: err.childError?.message ?? null, code: err.code };
    }
  }
}

@DurableWorkflow('child-timeout')
class Impatient {
  async run(_input: unknown, ctx: RunContext) {
    const c = await ctx.startChild(Forever, { tag: 't' });
    try {
      return await ctx.waitForChild(c, { timeoutMs: 300 });
    } catch (err) {
      return { gaveUp: (err as ChildRunError).childStatus, child: c.runId };
    }
  }
}

@DurableWorkflow('child-leaver')
class Leaver {
  async run(input: { wait: boolean }, ctx: RunContext) {
    const kept = await ctx.startChild(Forever, { tag: 'cancel-me' });
    const left = await ctx.startChild(Forever, { tag: 'abandon-me' }, { parentClose: 'abandon' });
    if (input.wait) await ctx.waitForChild(kept);
    return { kept: kept.runId, left: left.runId };
  }
}

@DurableWorkflow('child-tenant-job', {
  maxAttempts: 7,
  concurrencyKey: (i: { tenant: string }) => i.tenant,
  perKeyConcurrency: 2,
})
class TenantJob {
  async run(input: { tenant: string }) {
    return input.tenant;
  }
}

/** Starts its child by kind name, as a parent in another codebase would. */
@DurableWorkflow('child-by-name')
class ByName {
  async run(_input: unknown, ctx: RunContext) {
    const c = await ctx.startChild('child-tenant-job', { tenant: 'acme' });
    return { child: c.runId, out: await ctx.waitForChild(c) };
  }
}

/** Child runs: started once, awaited durably, failures typed, ends propagated by policy. */
describe('child runs', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let runs: RunRepository;
  let worker: DurableWorker;

  beforeAll(async () => {
    db = await createTestDatabase('child_runs');
    app = await bootApp(db.url, [
      Square,
      Forever,
      FanOut,
      Catcher,
      Impatient,
      Leaver,
      Tally,
      TenantJob,
      ByName,
    ]);
    runs = app.get(RunRepository);
    worker = app.get(DurableWorker);
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  /** Ticks until `id` reaches one of `statuses` (children and parent are all served by this worker). */
  async function until(id: string, statuses = ['succeeded', 'failed', 'cancelled', 'dead_lettered']) {
    await waitFor(
      async () => {
        await worker.tick();
        await worker.idle();
        return statuses.includes((await runs.get(id))!.status);
      },
      10000,
      `run ${id} to reach ${statuses.join('/')}`,
    );
    return (await runs.get(id))!;
  }
  const childrenOf = (id: string) =>
    db.query(
      `select id, kind, status, input, idempotency_key, parent_close from ai_runs where parent_id = $1 order by idempotency_key`,
      [id],
    );
  const trail = async (id: string) =>
    (await db.query(`select event_type, payload from ai_events where run_id = $1 order by id`, [
      id,
    ])) as Array<{
      event_type: string;
      payload: any;
    }>;

  it('fans out children, waits for all of them, and each exists once', async () => {
    const { run } = await runs.start(FanOut, { ns: [2, 3, 4] });
    const done = await until(run.id);
    expect(done.status).toBe('succeeded');
    expect(done.output).toEqual({ total: 29, each: [4, 9, 16] });
    const kids = await childrenOf(run.id);
    expect(kids).toHaveLength(3);
    expect(kids.every((k: any) => k.status === 'succeeded' && k.parent_close === 'cancel')).toBe(true);
    expect(kids.map((k: any) => k.idempotency_key).sort()).toEqual(
      [0, 1, 2].map((i) => `child:${run.id}:${i}`).sort(),
    );
    const events = (await trail(run.id)).map((e) => e.event_type);
    expect(events.filter((e) => e === 'child.started')).toHaveLength(3);
    expect(events.filter((e) => e === 'child.ended')).toHaveLength(3);
    // The children were all started before the parent first parked: the fan-out is concurrent.
    expect(events.indexOf('run.waiting_for_signal')).toBeGreaterThan(events.lastIndexOf('child.started'));
  });

  it('a child started by kind name gets what the kind declares here: its key function and attempts', async () => {
    const { run } = await runs.start(ByName, {});
    const done = await until(run.id);
    expect(done.status).toBe('succeeded');
    const child = (await runs.get((done.output as { child: string }).child))!;
    expect({ key: child.concurrencyKey, attempts: child.maxAttempts }).toEqual({ key: 'acme', attempts: 7 });
  });

  it('a failed child reaches the parent as a ChildRunError it can catch', async () => {
    const { run } = await runs.start(Catcher, { n: 5 });
    const done = await until(run.id);
    expect(done.output).toEqual({
      caught: 'failed',
      message: 'no square for 5',
      code: 'DURABLE_CHILD_RUN_FAILED',
    });
  });

  it('a wait that times out cancels the child and throws timed_out', async () => {
    const { run } = await runs.start(Impatient, {});
    const done = await until(run.id);
    expect(done.output).toMatchObject({ gaveUp: 'timed_out' });
    const child = await until((done.output as any).child, ['cancelled']);
    expect(child.cancelReason).toMatch(/stopped waiting after 300 ms/);
  });

  it("a parent's end cancels its cancel-policy children and leaves abandoned ones", async () => {
    const { run } = await runs.start(Leaver, { wait: false });
    const done = await until(run.id);
    const { kept, left } = done.output as { kept: string; left: string };
    expect((await until(kept, ['cancelled'])).cancelReason).toBe('its parent run ended (succeeded)');
    // The abandoned child runs on to its wait (ticks until it is there: one tick may not reach it on a
    // loaded machine), never cancelled.
    const abandoned = await until(left, ['waiting', 'cancelled']);
    expect(abandoned.status).toBe('waiting');
    expect(abandoned.cancelRequestedAt).toBeNull();
    await runs.cancel(left, 'test over');
  });

  it('cancelling a waiting parent cancels the child it waits for', async () => {
    const { run } = await runs.start(Leaver, { wait: true });
    await until(run.id, ['waiting']);
    const [kept, left] = (await childrenOf(run.id)).map((k: any) => k.id);
    await until(kept, ['waiting']);
    await runs.cancel(run.id, 'user gave up');
    expect((await runs.get(run.id))!.status).toBe('cancelled');
    const child = await until(kept, ['cancelled']);
    expect(child.cancelReason).toBe('its parent run ended (cancelled)');
    expect((await runs.get(left))!.status).not.toBe('cancelled');
    await runs.cancel(left, 'test over');
  });

  it('a child whose row was held when its parent ended is cancelled by the reconciler', async () => {
    const { run } = await runs.start(Leaver, { wait: true });
    await until(run.id, ['waiting']);
    const [kept, left] = (await childrenOf(run.id)).map((k: any) => k.id);
    await until(kept, ['waiting']);
    // Another statement holds the child's row while the parent ends: the parent's end skips it.
    const holder = new Client({ connectionString: db.url });
    await holder.connect();
    try {
      await holder.query('begin');
      await holder.query('select 1 from ai_runs where id = $1 for update', [kept]);
      await runs.cancel(run.id, 'user gave up');
    } finally {
      await holder.query('rollback');
      await holder.end();
    }
    expect((await runs.get(kept))!.cancelRequestedAt).toBeNull();
    const swept = await app.get(Reconciler).sweep();
    expect(swept.orphansCancelled).toBe(1);
    const child = await until(kept, ['cancelled']);
    expect(child.cancelReason).toBe('its parent run ended (cancelled)');
    expect((await runs.get(left))!.status).toBe('waiting'); // abandoned: not the reconciler's either
    await runs.cancel(left, 'test over');
    expect((await app.get(Reconciler).sweep()).orphansCancelled).toBeUndefined();
  });

  it("lists a run's children and refuses the engine's signal names", async () => {
    const { run } = await runs.start(FanOut, { ns: [6, 7] });
    await until(run.id);
    const page = await runs.list({ parentId: run.id });
    expect(page.items.map((r) => r.parentId)).toEqual([run.id, run.id]);
    expect(page.items.map((r) => r.kind)).toEqual(['child-square', 'child-square']);
    expect((await runs.get(run.id))!.parentId).toBeNull();
    await expect(runs.list({ parentId: 'nope' })).rejects.toMatchObject({ field: 'parentId' });
    const waiting = await runs.start(Leaver, { wait: true });
    await until(waiting.run.id, ['waiting']);
    await expect(runs.signal(waiting.run.id, `$child:${page.items[0].id}`, {})).rejects.toMatchObject({
      code: 'DURABLE_INVALID_ARGUMENT',
      field: 'name',
    });
    await runs.cancel(waiting.run.id);
  });
});
