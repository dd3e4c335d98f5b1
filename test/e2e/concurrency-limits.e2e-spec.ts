import { INestApplication, Injectable } from '@nestjs/common';
import { DurableStep, DurableWorkflow, RunContext, RunRepository } from '../../src';
import { DurableUsageError } from '../../src/errors/durable-usage.error';
import { InvalidArgumentError } from '../../src/errors/invalid-argument.error';
import { DurableWorker } from '../../src/engine/worker.service';
import { Reconciler } from '../../src/maintenance/reconciler.service';
import { KindLimits, LimitsStore } from '../../src/store/limits.store';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { gate } from '../helpers/drive';
import { waitFor } from '../helpers/processes';

/** Steps held open by test, by run input id. */
const gates = new Map<string, ReturnType<typeof gate>>();

@Injectable()
class Work {
  @DurableStep()
  async hold(id: string) {
    await gates.get(id)?.promise;
    return id;
  }
}

@DurableWorkflow('kindcap', { concurrency: 2 })
class KindCap {
  constructor(private readonly w: Work) {}
  async run(input: { id: string }) {
    return this.w.hold(input.id);
  }
}

@DurableWorkflow('keycap', { concurrencyKey: (i: { tenant: string }) => i.tenant, perKeyConcurrency: 1 })
class KeyCap {
  constructor(private readonly w: Work) {}
  async run(input: { id: string; tenant: string }) {
    return this.w.hold(input.id);
  }
}

@DurableWorkflow('waiter', { concurrency: 1 })
class Waiter {
  constructor(private readonly w: Work) {}
  async run(input: { id: string }, ctx: RunContext) {
    await this.w.hold(input.id);
    return ctx.waitForSignal('go');
  }
}

/** Fleet-wide concurrency limits, in one process driven tick by tick (the multi-process proof is in workers-limits). */
describe('concurrency limits per kind and per key', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let runs: RunRepository;
  let worker: DurableWorker;

  beforeAll(async () => {
    db = await createTestDatabase('limits');
    app = await bootApp(db.url, [Work, KindCap, KeyCap, Waiter], { worker: { concurrency: 10 } });
    runs = app.get(RunRepository);
    worker = app.get(DurableWorker);
  });
  afterAll(async () => {
    for (const g of gates.values()) g.open();
    await worker?.idle();
    await app?.close();
    await db?.drop();
  });

  const running = async (kind: string) =>
    (
      await db.query(`select count(*)::int as n from ai_runs where kind = $1 and status = 'running'`, [kind])
    )[0].n;
  const held = async (kind: string) =>
    (
      await db.query(
        `select input->>'id' as id, limited_by from ai_runs where kind = $1 and limited_by is not null
                      and status in ('pending', 'waiting') order by input->>'id'`,
        [kind],
      )
    ).map((r: any) => ({ id: r.id, scope: JSON.parse(r.limited_by) }));
  const startHeld = async (kind: string, ids: string[], extra: Record<string, unknown> = {}) => {
    const out: string[] = [];
    for (const id of ids) {
      gates.set(id, gate());
      out.push((await runs.start(kind, { id, ...extra })).run.id);
    }
    return out;
  };
  const finish = async (id: string, runId: string) => {
    gates.get(id)!.open();
    await waitFor(
      async () => (await runs.get(runId))!.status === 'succeeded',
      10_000,
      `run ${id} to succeed`,
    );
  };

  it('a kind limit: two run at once, the others wait out of the claim index until a slot frees', async () => {
    const ids = ['k1', 'k2', 'k3', 'k4', 'k5'];
    const runIds = await startHeld('kindcap', ids);
    await worker.tick();
    expect(await running('kindcap')).toBe(2);
    expect((await held('kindcap')).map((h) => h.scope)).toEqual([['kindcap'], ['kindcap'], ['kindcap']]);
    const limited = await db.query(`select payload from ai_events where event_type = 'run.limited'`);
    expect(limited).toHaveLength(3);
    expect(limited[0].payload).toEqual({ scope: ['kindcap'] });
    const claimed = await db.query(
      `select payload->'slots' as slots from ai_events e join ai_runs r on r.id = e.run_id
        where e.event_type = 'run.claimed' and r.kind = 'kindcap' order by e.id`,
    );
    expect(claimed.map((c: any) => c.slots).sort()).toEqual([[[['kindcap'], 1]], [[['kindcap'], 2]]].sort());

    // The claim does not rescan held runs: another tick claims nothing and holds nothing more.
    await worker.tick();
    expect(await running('kindcap')).toBe(2);
    expect(await db.query(`select 1 from ai_events where event_type = 'run.limited'`)).toHaveLength(3);

    // One run ends: the statement that ends it frees its slot and wakes exactly one held run.
    const first = (
      await db.query(
        `select id, input->>'id' as k from ai_runs where kind = 'kindcap' and status = 'running' limit 1`,
      )
    )[0];
    await finish(first.k, first.id);
    expect(await held('kindcap')).toHaveLength(2);
    await worker.tick();
    expect(await running('kindcap')).toBe(2);
    for (const [i, id] of ids.entries()) {
      gates.get(id)!.open();
      await waitFor(
        async () => {
          await worker.tick();
          return (await runs.get(runIds[i]))!.status === 'succeeded';
        },
        10_000,
        `run ${id}`,
      );
      expect(await running('kindcap')).toBeLessThanOrEqual(2);
    }
    expect(await held('kindcap')).toEqual([]);
    expect(await db.query(`select * from ai_slots where run_id is not null`)).toEqual([]);
  });

  it('a key limit: one run per tenant at once; other tenants are not held back', async () => {
    const a = await startHeld('keycap', ['a1', 'a2'], { tenant: 'A' });
    await startHeld('keycap', ['b1'], { tenant: 'B' });
    expect((await runs.get(a[0]))!.concurrencyKey).toBe('A');
    await worker.tick();
    expect(await running('keycap')).toBe(2);
    expect(await held('keycap')).toEqual([{ id: 'a2', scope: ['keycap', 'A'] }]);
    expect((await runs.get(a[1]))!.limitedBy).toEqual({
      limit: 'concurrency',
      kind: 'keycap',
      key: 'A',
      scope: '["keycap", "A"]',
    });
    await finish('a1', a[0]);
    await worker.tick();
    expect((await runs.get(a[1]))!.status).toBe('running');
    for (const id of ['a2', 'b1']) gates.get(id)!.open();
    await worker.idle();
    expect(await running('keycap')).toBe(0);
  });

  it('a run parked on a signal holds no slot; it takes one again when the signal wakes it', async () => {
    const [w1, w2] = await startHeld('waiter', ['w1', 'w2']);
    gates.get('w1')!.open();
    gates.get('w2')!.open();
    // w2 is held while w1 runs; w1's park frees the slot and wakes it (a finished run nudges the worker).
    await waitFor(
      async () => {
        await worker.tick();
        await worker.idle();
        return (await runs.get(w2))!.status === 'waiting' && (await runs.get(w1))!.status === 'waiting';
      },
      10_000,
      'both runs parked on their signal',
    );
    expect(await db.query(`select * from ai_slots where kind = 'waiter' and run_id is not null`)).toEqual([]);
    await runs.signal(w1, 'go', 1);
    await runs.signal(w2, 'go', 2);
    await waitFor(
      async () => {
        await worker.tick();
        await worker.idle();
        return (await runs.get(w2))!.status === 'succeeded' && (await runs.get(w1))!.status === 'succeeded';
      },
      10_000,
      'both runs to finish',
    );
    expect((await runs.get(w1))!.output).toBe(1);
    expect((await runs.get(w2))!.output).toBe(2);
  });

  it('the reconciler wakes a run held on a scope with a free slot, and frees a slot its run left behind', async () => {
    const [r1] = await startHeld('kindcap', ['s1']);
    gates.get('s1')!.open();
    // A held run whose wake was lost (its scope has free slots), and a slot owned by a finished run.
    await db.query(`update ai_runs set limited_by = '["kindcap"]' where id = $1`, [r1]);
    const done = (
      await db.query(`select id, epoch from ai_runs where kind = 'kindcap' and status = 'succeeded' limit 1`)
    )[0];
    await db.query(
      `update ai_slots set run_id = $1, epoch = $2, taken_at = now() - interval '2 minutes' where scope = '["kindcap"]' and n = 2`,
      [done.id, done.epoch],
    );
    await worker.tick();
    expect((await runs.get(r1))!.status).toBe('pending');
    const res = await app.get(Reconciler).sweep();
    expect(res.woken).toBe(1);
    expect(await db.query(`select * from ai_slots where run_id is not null`)).toEqual([]);
    await waitFor(
      async () => {
        await worker.tick();
        await worker.idle();
        return (await runs.get(r1))!.status === 'succeeded';
      },
      10_000,
      'the woken run',
    );
  });

  it('an expired lease frees its slot in the statement that requeues the run', async () => {
    const [e1] = await startHeld('kindcap', ['e1']);
    await worker.tick();
    expect(await db.query(`select * from ai_slots where run_id = $1`, [e1])).toHaveLength(1);
    await db.query(`update ai_runs set lease_expires_at = now() - interval '1 second' where id = $1`, [e1]);
    await app.get(Reconciler).sweep();
    expect(await db.query(`select * from ai_slots where run_id = $1`, [e1])).toEqual([]);
    gates.get('e1')!.open();
    await worker.idle();
  });

  it('a kind declared again without limits loses its row, so nobody limits it; declared with one, it is back', async () => {
    const store = app.get(LimitsStore);
    const caps = async () =>
      (
        await db.query(
          `select kind, kind_cap from ai_limits where kind in ('kindcap', 'waiter') order by kind`,
        )
      ).map((r: { kind: string; kind_cap: number }) => `${r.kind}:${r.kind_cap}`);
    const free = (kind: string): KindLimits => ({
      kind,
      kindCap: null,
      keyCap: null,
      rate: null,
      holdWhileWaiting: true,
    });
    expect(await caps()).toEqual(['kindcap:2', 'waiter:1']);
    // Every kind without a limit (the one-table statement): both rows go.
    await store.declare([free('kindcap'), free('waiter')]);
    expect(await caps()).toEqual([]);
    // One kind with a limit (the whole statement): its row is back, the other stays gone.
    await store.declare([{ ...free('kindcap'), kindCap: 2, holdWhileWaiting: false }, free('waiter')]);
    expect(await caps()).toEqual(['kindcap:2']);
    await store.declare([{ ...free('waiter'), kindCap: 1, holdWhileWaiting: false }]);
    expect(await caps()).toEqual(['kindcap:2', 'waiter:1']);
  });

  it('refuses bad limits at decoration and a bad key at start, naming the field', async () => {
    expect(() => DurableWorkflow('bad', { concurrency: 0 })).toThrow(DurableUsageError);
    expect(() => DurableWorkflow('bad', { concurrency: 0 })).toThrow(/concurrency must be an integer from 1/);
    expect(() => DurableWorkflow('bad', { perKeyConcurrency: 2 })).toThrow(/needs concurrencyKey/);
    expect(() => DurableWorkflow('bad', { concurrencyKey: () => 'x' })).toThrow(/without perKeyConcurrency/);
    await expect(runs.start('keycap', { id: 'x', tenant: 'x'.repeat(201) })).rejects.toThrow(
      InvalidArgumentError,
    );
    await expect(runs.start('keycap', { id: 'x', tenant: 'x'.repeat(201) })).rejects.toThrow(
      /concurrencyKey/,
    );
    await expect(
      runs.start('keycap', { id: 'x', tenant: 'a' }, { concurrencyKey: 'bad\nkey' }),
    ).rejects.toThrow(/concurrencyKey must not contain control characters/);
    expect(await db.query(`select 1 from ai_runs where input->>'id' = 'x'`)).toEqual([]);
  });
});
