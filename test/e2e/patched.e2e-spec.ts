import { INestApplication } from '@nestjs/common';
import { DurableStep, DurableWorkflow, RunContext, RunRepository, RunView } from '../../src';
import { DurableWorker } from '../../src/engine/worker.service';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { waitFor } from '../helpers/processes';
import { driveUntilHeld } from '../helpers/drive';

const ran: string[] = [];

class PatchSteps {
  @DurableStep({ name: 'a' })
  async a(id: string) {
    ran.push(`${id}:a`);
    return 1;
  }
  @DurableStep({ name: 'fraud_check' })
  async fraud(id: string) {
    ran.push(`${id}:fraud`);
    return 'clean';
  }
  @DurableStep({ name: 'c' })
  async c(id: string) {
    ran.push(`${id}:c`);
    return 3;
  }
}

/** Version 1, deployed first. */
@DurableWorkflow('patch-flow')
class FlowV1 {
  constructor(private readonly s: PatchSteps) {}
  async run(input: { id: string }, ctx: RunContext) {
    await this.s.a(input.id);
    await ctx.waitForSignal('go');
    await this.s.c(input.id);
    await ctx.waitForSignal('done');
    return { path: 'v1' };
  }
}

/** Version 2 adds a fraud check after the first wait, behind a patch. */
@DurableWorkflow('patch-flow')
class FlowV2 {
  constructor(private readonly s: PatchSteps) {}
  async run(input: { id: string }, ctx: RunContext) {
    await this.s.a(input.id);
    await ctx.waitForSignal('go');
    const patched = ctx.patched('fraud-check');
    if (patched) await this.s.fraud(input.id);
    await this.s.c(input.id);
    await ctx.waitForSignal('done');
    return { path: patched ? 'new' : 'old' };
  }
}

/** Version 3, once no run could take the old path: the patch deprecated, the old path gone. */
@DurableWorkflow('patch-flow')
class FlowV3 {
  constructor(private readonly s: PatchSteps) {}
  async run(input: { id: string }, ctx: RunContext) {
    await this.s.a(input.id);
    await ctx.waitForSignal('go');
    ctx.deprecatePatch('fraud-check');
    await this.s.fraud(input.id);
    await this.s.c(input.id);
    await ctx.waitForSignal('done');
    return { path: 'v3' };
  }
}

@DurableWorkflow('patch-misuse')
class Misuse {
  async run(input: { id: string }, ctx: RunContext) {
    return ctx.patched(input.id);
  }
}

/** ctx.patched: a workflow changed under runs parked before and after the patch point, across restarts. */
describe('ctx.patched', () => {
  let db: TestDatabase;
  let app: INestApplication;
  const boot = async (flow: unknown) => {
    await app?.close();
    app = await bootApp(db.url, [PatchSteps, flow as never, Misuse]);
  };
  const runs = () => app.get(RunRepository);

  beforeAll(async () => {
    db = await createTestDatabase('patched');
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  /** Ticks until the run ends or parks waiting for `signal`. */
  async function until(id: string, signal?: string): Promise<RunView> {
    const worker = app.get(DurableWorker);
    let view: RunView | null = null;
    await waitFor(
      async () => {
        await worker.tick();
        await worker.idle();
        view = await runs().get(id);
        if (signal) return view!.status === 'waiting' && !!view!.parkedReason?.includes(`"${signal}"`);
        return ['succeeded', 'failed', 'cancelled', 'dead_lettered'].includes(view!.status);
      },
      10_000,
      `run ${id} to ${signal ? `wait for ${signal}` : 'end'}`,
    ).catch(async (e) => {
      console.log(
        JSON.stringify(view),
        JSON.stringify((await runs().events(id)).map((x) => [x.type, x.payload])),
      );
      throw e;
    });
    return view!;
  }
  const start = async (id: string) => (await runs().start('patch-flow', { id })).run.id;

  it('runs before the patch point take the new path, runs past it the old one, new runs the new one', async () => {
    await boot(FlowV1);
    const before = await start('before');
    const after = await start('after');
    await until(before, 'go');
    await until(after, 'go');
    await runs().signal(after, 'go');
    await until(after, 'done'); // v1 ran c: this run is past the patch point
    await boot(FlowV2); // the deploy: a new process with the changed code
    const fresh = await start('fresh');
    expect(await runs().patchStatus('patch-flow', 'fraud-check')).toMatchObject({
      openWithPatch: 0,
      openMayTakeOldPath: 3, // no run has the marker yet: every open one may be old
      firstMarkedAt: null,
    });
    for (const id of [before, fresh]) {
      await until(id, 'go');
      await runs().signal(id, 'go');
      await until(id, 'done');
    }
    const status = await runs().patchStatus('patch-flow', 'fraud-check');
    expect(status).toMatchObject({ openWithPatch: 2, openMayTakeOldPath: 1 }); // `after`, created earlier
    for (const id of [before, after, fresh]) await runs().signal(id, 'done');
    const ended = await Promise.all([before, after, fresh].map((id) => until(id)));
    expect(ended.map((r) => [r.status, r.output])).toEqual([
      ['succeeded', { path: 'new' }],
      ['succeeded', { path: 'old' }],
      ['succeeded', { path: 'new' }],
    ]);
    // Every step ran once: the old-path run replayed c after the patch point, it did not run it again.
    for (const id of ['before', 'after', 'fresh']) expect(ran.filter((r) => r === `${id}:c`)).toHaveLength(1);
    expect(ran.filter((r) => r.endsWith(':fraud')).sort()).toEqual(['before:fraud', 'fresh:fraud']);
    expect(await runs().patchStatus('patch-flow', 'fraud-check')).toMatchObject({
      openWithPatch: 0,
      openMayTakeOldPath: 0,
    });
  });

  it('a deprecated patch replays the runs that recorded it', async () => {
    await boot(FlowV2);
    const marked = await start('marked');
    await until(marked, 'go');
    await runs().signal(marked, 'go');
    await until(marked, 'done');
    expect(await runs().patchStatus('patch-flow', 'fraud-check')).toMatchObject({
      openWithPatch: 1,
      openMayTakeOldPath: 0, // safe to deprecate
    });
    await boot(FlowV3);
    await runs().signal(marked, 'done');
    const done = await until(marked);
    expect([done.status, done.output]).toEqual(['succeeded', { path: 'v3' }]);
    expect(ran.filter((r) => r.startsWith('marked:'))).toEqual(['marked:a', 'marked:fraud', 'marked:c']);
  });

  it('refuses a bad patch id, in the workflow and in patchStatus', async () => {
    const { run } = await runs().start('patch-misuse', { id: 'not ok!' });
    const failed = await until(run.id);
    expect(failed.status).toBe('failed');
    expect(failed.error?.message).toMatch(/ctx\.patched\(id\): id must be/);
    await expect(runs().patchStatus('patch-flow', 'no spaces')).rejects.toMatchObject({ field: 'patchId' });
  });

  it('a run an old worker held during a rolling deploy resumes with retryHeld once the new code is back', async () => {
    await boot(FlowV2);
    const id = await start('rolling');
    await until(id, 'go');
    await runs().signal(id, 'go');
    await until(id, 'done'); // the new path: marker and fraud check recorded
    await boot(FlowV1); // an old worker still in the fleet claims it
    await runs().signal(id, 'done');
    const held = await driveUntilHeld(app, db, id);
    expect(held!.parkedReason).toMatch(/^held for a fixed deploy/);
    expect(held!.error?.code).toBe('DURABLE_NON_DETERMINISM');
    await boot(FlowV2); // the new code everywhere
    // The kind is unversioned: its runs are version 1, and a retry of another version takes none.
    expect(await runs().versions('patch-flow')).toContainEqual(
      expect.objectContaining({ kind: 'patch-flow', version: 1, waiting: 1, held: 1 }),
    );
    expect(await runs().retryHeld('patch-flow', { version: 2 })).toEqual({ retried: 0 });
    await expect(runs().retryHeld('patch-flow', { version: 0 })).rejects.toMatchObject({ field: 'version' });
    expect(await runs().retryHeld('patch-flow', { version: 1, by: 'ops' })).toEqual({ retried: 1 });
    const done = await until(id);
    expect([done.status, done.output]).toEqual(['succeeded', { path: 'new' }]);
    expect(ran.filter((r) => r === 'rolling:c')).toHaveLength(1);
    expect(await runs().retryHeld('patch-flow')).toEqual({ retried: 0 });
  });
});
