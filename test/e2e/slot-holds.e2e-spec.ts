import { INestApplication, Injectable } from '@nestjs/common';
import { DurableSchedules, DurableStep, DurableWorkflow, RunContext, RunRepository } from '../../src';
import { DurableWorker } from '../../src/engine/worker.service';
import { Reconciler } from '../../src/maintenance/reconciler.service';
import { ScheduleRunner } from '../../src/maintenance/schedule-runner.service';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { waitFor } from '../helpers/processes';
import { tickUntilStatus } from '../helpers/drive';

@Injectable()
class Steps {
  @DurableStep()
  async echo(v: string) {
    return v;
  }
}

/** Holds its one slot while it waits for 'go'. */
@DurableWorkflow('holder', { concurrency: 1, holdSlotWhileWaiting: true })
class Holder {
  constructor(private readonly s: Steps) {}
  async run(input: { id: string; wait?: boolean }, ctx: RunContext) {
    await this.s.echo(input.id);
    if (input.wait) await ctx.waitForSignal('go');
    await ctx.sleep(input.wait ? 200 : 0); // 200 ms parks (a timer already due when the run blocks fires in place)
    return this.s.echo(`${input.id}-done`);
  }
}

/** One run per tenant, held while waiting; a parent waits for a child of its own tenant. */
@DurableWorkflow('tenant-job', {
  concurrencyKey: (i: { tenant: string }) => i.tenant,
  perKeyConcurrency: 1,
  holdSlotWhileWaiting: true,
})
class TenantJob {
  constructor(private readonly s: Steps) {}
  async run(input: { tenant: string; child?: boolean; schedule?: string }, ctx: RunContext): Promise<string> {
    if (input.child) return this.s.echo(`child of ${input.tenant}`);
    if (input.schedule) return this.s.echo(`tick of ${input.tenant}`);
    return ctx.child(TenantJob, { tenant: input.tenant, child: true });
  }
}

/**
 * `holdSlotWhileWaiting`: a waiting run keeps its slots and takes them back at its next claim; a cancel
 * frees them; a wait for a child frees them (no deadlock on a key). And a schedule's runs get its key.
 */
describe('holding a slot while waiting, and the key of scheduled runs', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let runs: RunRepository;
  let worker: DurableWorker;

  beforeAll(async () => {
    db = await createTestDatabase('slot_holds');
    app = await bootApp(db.url, [Steps, Holder, TenantJob], {
      worker: { concurrency: 10 },
      limits: { minScheduleIntervalMs: 1000 }, // schedules made at run time that fire every second
    });
    runs = app.get(RunRepository);
    worker = app.get(DurableWorker);
  });
  afterAll(async () => {
    await worker?.idle();
    await app?.close();
    await db?.drop();
  });

  const slotsOf = async (runId: string) =>
    db.query(`select scope, n, epoch::int as epoch from ai_slots where run_id = $1 order by scope`, [runId]);
  const drive = (runId: string, status: string, what: string) => tickUntilStatus(app, runId, status, what);

  it('a waiting run keeps its slot, others stay queued, and its next claim takes the same slot back', async () => {
    const a = (await runs.start('holder', { id: 'a', wait: true })).run.id;
    await drive(a, 'waiting', 'a parked on its signal');
    expect(await slotsOf(a)).toEqual([{ scope: '["holder"]', n: 1, epoch: 1 }]);

    const b = (await runs.start('holder', { id: 'b' })).run.id;
    await worker.tick();
    await worker.idle();
    const bView = (await runs.get(b))!;
    expect(bView.status).toBe('pending');
    expect(bView.limitedBy).toEqual({ limit: 'concurrency', kind: 'holder', scope: '["holder"]' });
    // The reconciler's net does not take a waiting holder's slot for a leak, even when it is old.
    await db.query(`update ai_slots set taken_at = now() - interval '5 minutes' where run_id = $1`, [a]);
    await app.get(Reconciler).sweep();
    expect(await slotsOf(a)).toEqual([{ scope: '["holder"]', n: 1, epoch: 1 }]);
    expect((await runs.get(b))!.status).toBe('pending');

    await runs.signal(a, 'go', true);
    await drive(a, 'succeeded', 'a to finish');
    // Claimed twice more (after the signal, after the 200 ms sleep): each claim names the slot it took back.
    const claims = await db.query(
      `select epoch::int as epoch, payload->'slots' as slots from ai_events where run_id = $1 and event_type = 'run.claimed' order by id`,
      [a],
    );
    expect(claims).toEqual([
      { epoch: 1, slots: [[['holder'], 1]] },
      { epoch: 2, slots: [[['holder'], 1]] },
      { epoch: 3, slots: [[['holder'], 1]] },
    ]);
    expect(await slotsOf(a)).toEqual([]);
    await drive(b, 'succeeded', 'b, once a ended');
    expect((await runs.get(b))!.output).toBe('b-done');
  });

  it('cancelling a waiting holder frees its slot in the same statement, and wakes the queued run', async () => {
    const a = (await runs.start('holder', { id: 'c1', wait: true })).run.id;
    await drive(a, 'waiting', 'c1 parked');
    const b = (await runs.start('holder', { id: 'c2' })).run.id;
    await worker.tick();
    expect((await runs.get(b))!.limitedBy?.scope).toBe('["holder"]');
    await runs.cancel(a, 'test');
    expect((await runs.get(a))!.status).toBe('cancelled');
    expect(await slotsOf(a)).toEqual([]);
    expect((await runs.get(b))!.limitedBy).toBeNull();
    await drive(b, 'succeeded', 'c2 after the cancel');
  });

  it('a parent waiting for a child of its own key frees its slot: no deadlock with one slot per key', async () => {
    const p = (await runs.start('tenant-job', { tenant: 'acme' })).run.id;
    await drive(p, 'succeeded', 'the parent, after its child');
    expect((await runs.get(p))!.output).toBe('child of acme');
    const [child] = (await runs.list({ parentId: p })).items;
    expect(child.concurrencyKey).toBe('acme');
    expect(await db.query(`select 1 from ai_slots where run_id is not null`)).toEqual([]);
  });

  it("a schedule's runs get its concurrency key: given, or the workflow's concurrencyKey of its input", async () => {
    const schedules = app.get(DurableSchedules);
    const given = await schedules.create('tick-given', 'tenant-job', '* * * * * *', {
      input: { tenant: 'ignored' },
      concurrencyKey: 'globex',
    });
    expect(given.concurrencyKey).toBe('globex');
    const computed = await schedules.create('tick-computed', 'tenant-job', '* * * * * *', {
      input: { tenant: 'initech' },
    });
    expect(computed.concurrencyKey).toBe('initech');
    await expect(
      schedules.create('tick-bad', 'tenant-job', '* * * * * *', { concurrencyKey: '' }),
    ).rejects.toThrow(/concurrencyKey/);

    await waitFor(
      async () => {
        await app.get(ScheduleRunner).tick();
        const rows = await db.query(
          `select distinct concurrency_key from ai_runs where idempotency_key like 'cron:tick-%'`,
        );
        return rows.length === 2;
      },
      10_000,
      'both schedules to fire',
    );
    await schedules.remove('tick-given');
    await schedules.remove('tick-computed');
    const keyed = await db.query(
      `select idempotency_key, concurrency_key from ai_runs where idempotency_key like 'cron:tick-%' order by 1`,
    );
    for (const r of keyed)
      expect(r.concurrency_key).toBe(r.idempotency_key.startsWith('cron:tick-given:') ? 'globex' : 'initech');
    // The key's slots were made with the runs, so the runs are limited per key like any other.
    const slotScopes = await db.query(
      `select distinct scope from ai_slots where kind = 'tenant-job' order by 1`,
    );
    expect(slotScopes.map((s: any) => s.scope)).toEqual(
      expect.arrayContaining(['["tenant-job", "globex"]', '["tenant-job", "initech"]']),
    );
    for (const r of await db.query(`select id from ai_runs where idempotency_key like 'cron:tick-%'`))
      await drive(r.id, 'succeeded', 'a scheduled run');
  });

  it('refuses holdSlotWhileWaiting without a concurrency limit, naming the option', () => {
    expect(() => DurableWorkflow('bad', { holdSlotWhileWaiting: true })).toThrow(
      /holdSlotWhileWaiting needs concurrency or perKeyConcurrency/,
    );
    expect(() => DurableWorkflow('bad', { concurrency: 1, holdSlotWhileWaiting: 'yes' as never })).toThrow(
      /holdSlotWhileWaiting must be a boolean/,
    );
  });
});
