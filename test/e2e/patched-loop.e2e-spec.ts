import { INestApplication } from '@nestjs/common';
import { DurableStep, DurableWorkflow, RunContext, RunRepository, RunView } from '../../src';
import { DurableWorker } from '../../src/engine/worker.service';
import { replayRuns } from '../../src/testing';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntilHeld } from '../helpers/drive';
import { waitFor } from '../helpers/processes';

/**
 * Issue 35: `ctx.patched(id)` inside a loop, under a run parked mid-loop across the deploy. The first
 * answer for an id stands for the whole run: a run whose record already passed a call of the id on the
 * old code takes the old path in every later iteration too (and records that answer: a marker false),
 * and is never held; a run that gets there first on the new code takes the new path in every iteration.
 * A marker an earlier release wrote in the middle of such a loop (the old path recorded before it) is
 * read by its position: the calls before it answer false, those from it on true. The replay check
 * replays held runs and tells whether the current code replays them.
 */

const ran: string[] = [];
const ITERATIONS = 3;

class LoopTools {
  @DurableStep({ name: 'old_tool' })
  async oldTool(id: string, i: number) {
    ran.push(`${id}:old:${i}`);
    return `old-${i}`;
  }
  @DurableStep({ name: 'new_tool' })
  async newTool(id: string, i: number) {
    ran.push(`${id}:new:${i}`);
    return `new-${i}`;
  }
}

/** The code deployed first: the old tool, no patch. */
@DurableWorkflow('tool-loop')
class LoopV1 {
  constructor(private readonly t: LoopTools) {}
  async run(input: { id: string }, ctx: RunContext) {
    const paths: string[] = [];
    for (let i = 0; i < ITERATIONS; i++) {
      paths.push(await this.t.oldTool(input.id, i));
      await ctx.waitForSignal('next');
    }
    return { paths };
  }
}

/** The deploy: the new tool behind a patch, called in every iteration. */
@DurableWorkflow('tool-loop')
class LoopV2 {
  constructor(private readonly t: LoopTools) {}
  async run(input: { id: string }, ctx: RunContext) {
    const paths: string[] = [];
    for (let i = 0; i < ITERATIONS; i++) {
      if (ctx.patched('new-tool')) paths.push(await this.t.newTool(input.id, i));
      else paths.push(await this.t.oldTool(input.id, i));
      await ctx.waitForSignal('next');
    }
    return { paths };
  }
}

/**
 * The record the release before the fix wrote under a run parked in iteration 0: its replay answered
 * false at iteration 0 (the record went past it) and true at iteration 1 (the end of the record), where
 * it wrote the marker. Those are its two answers, made here without the call at iteration 0.
 */
@DurableWorkflow('tool-loop')
class LoopEarlierRelease {
  constructor(private readonly t: LoopTools) {}
  async run(input: { id: string }, ctx: RunContext) {
    const paths: string[] = [];
    for (let i = 0; i < ITERATIONS; i++) {
      if (i > 0 && ctx.patched('new-tool')) paths.push(await this.t.newTool(input.id, i));
      else paths.push(await this.t.oldTool(input.id, i));
      await ctx.waitForSignal('next');
    }
    return { paths };
  }
}

const ENDED = ['succeeded', 'failed', 'cancelled', 'dead_lettered'];

describe('ctx.patched in a loop (issue 35)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  const boot = async (flow: unknown) => {
    await app?.close();
    app = await bootApp(db.url, [LoopTools, flow as never]);
  };
  const runs = () => app.get(RunRepository);
  const start = async (id: string) => (await runs().start('tool-loop', { id })).run.id;
  const tools = async (runId: string) =>
    (
      await db.query(
        `select step_name from ai_checkpoints where run_id = $1 and step_name in ('old_tool', 'new_tool')
          order by step_index`,
        [runId],
      )
    ).map((r: { step_name: string }) => r.step_name);
  const marker = async (runId: string) =>
    (
      await db.query(
        `select output from ai_checkpoints where run_id = $1 and step_name = '$patch:new-tool'`,
        [runId],
      )
    ).map((r: { output: unknown }) => r.output);
  const check = async (runId: string) => (await replayRuns(app, { runIds: [runId] }))[0];

  /** Ticks until the run ends, is held, or parks with `n` tool calls recorded. */
  async function drive(runId: string, n?: number): Promise<RunView> {
    const worker = app.get(DurableWorker);
    let view: RunView | null = null;
    await waitFor(
      async () => {
        await worker.tick();
        await worker.idle();
        view = (await runs().get(runId))!;
        if (ENDED.includes(view.status) || view.parkedReason?.startsWith('held')) return true;
        return view.status === 'waiting' && n !== undefined && (await tools(runId)).length >= n;
      },
      10_000,
      `run ${runId} to park after ${n} tool calls`,
    );
    return view!;
  }
  /** Sends `next` and drives the run to its next park (`n` tool calls) or end; fails on a hold. */
  async function next(runId: string, n?: number): Promise<RunView> {
    await runs().signal(runId, 'next');
    const view = await drive(runId, n);
    if (view.parkedReason?.startsWith('held')) throw new Error(`run ${runId} was ${view.parkedReason}`);
    return view;
  }

  beforeAll(async () => {
    db = await createTestDatabase('patchedloop');
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('a run parked mid-loop on the old code finishes the old path in every iteration, and is never held', async () => {
    await boot(LoopV1);
    const id = await start('old');
    expect((await drive(id, 1)).status).toBe('waiting'); // old_tool at iteration 0, waiting for `next`
    await boot(LoopV2); // the deploy
    expect(await check(id)).toMatchObject({ ended: 'end-of-record', problems: [] });
    await next(id, 2); // iteration 1: the old path again (the first answer, at iteration 0, was false)
    expect(await marker(id)).toEqual([false]); // the answer is recorded
    await boot(LoopV2); // another process: every claim replays from the top
    await next(id, 3); // iteration 0 replays false again: the run is not held
    const done = await next(id);
    expect([done.status, done.output]).toEqual(['succeeded', { paths: ['old-0', 'old-1', 'old-2'] }]);
    expect(await tools(id)).toEqual(['old_tool', 'old_tool', 'old_tool']);
    expect(ran.filter((r) => r.startsWith('old:'))).toEqual(['old:old:0', 'old:old:1', 'old:old:2']);
    expect(await check(id)).toMatchObject({ status: 'succeeded', ended: 'returned', problems: [] });
    await boot(LoopV1); // the old code replays it too: it never asks for the marker false, and need not
    expect(await check(id)).toMatchObject({ status: 'succeeded', ended: 'returned', problems: [] });
  });

  it('a run that starts on the new code takes the new path in every iteration; patchStatus counts both', async () => {
    await boot(LoopV2);
    const fresh = await start('fresh');
    await drive(fresh, 1);
    expect(await marker(fresh)).toEqual([true]);
    // A rolling deploy: an old worker starts a run after the first marker was written...
    await boot(LoopV1);
    const late = await start('late');
    await drive(late, 1);
    await boot(LoopV2);
    await next(late, 2); // ...and the new code drives it on: it took the old path, and records so
    expect(await marker(late)).toEqual([false]);
    expect(await runs().patchStatus('tool-loop', 'new-tool')).toMatchObject({
      openWithPatch: 1, // fresh
      openMayTakeOldPath: 1, // late: created after the first marker, but it recorded false
    });
    for (let n = 2; n <= ITERATIONS; n++) await next(fresh, n);
    const done = await next(fresh);
    expect([done.status, done.output]).toEqual(['succeeded', { paths: ['new-0', 'new-1', 'new-2'] }]);
    expect(ran.filter((r) => r.startsWith('fresh:'))).toEqual(['fresh:new:0', 'fresh:new:1', 'fresh:new:2']);
    expect(await check(fresh)).toMatchObject({ ended: 'returned', problems: [] });
    await next(late, 3);
    expect((await next(late)).output).toEqual({ paths: ['old-0', 'old-1', 'old-2'] });
  });

  /** A run parked in iteration 0 on the old code, then driven one iteration by the earlier release. */
  async function markedByEarlierRelease(name: string): Promise<string> {
    await boot(LoopV1);
    const id = await start(name);
    await drive(id, 1);
    await boot(LoopEarlierRelease);
    await next(id, 2);
    expect(await tools(id)).toEqual(['old_tool', 'new_tool']);
    expect(await marker(id)).toEqual([true]); // written at iteration 1, after old_tool at iteration 0
    return id;
  }

  it('a marker an earlier release wrote mid-loop: calls before it answer false, calls from it on true', async () => {
    const id = await markedByEarlierRelease('legacy');
    await boot(LoopV2); // the fixed release (before it: "recorded step #0 as old_tool but ... new_tool")
    expect(await check(id)).toMatchObject({ ended: 'end-of-record', problems: [] });
    await next(id, 3);
    const done = await next(id);
    expect([done.status, done.output]).toEqual(['succeeded', { paths: ['old-0', 'new-1', 'new-2'] }]);
    expect(ran.filter((r) => r.startsWith('legacy:'))).toEqual([
      'legacy:old:0',
      'legacy:new:1',
      'legacy:new:2',
    ]);
    expect(await check(id)).toMatchObject({ ended: 'returned', problems: [] });
  });

  it('the replay check replays a held run: it still diverges on the code that held it, and replays on the fix', async () => {
    const id = await markedByEarlierRelease('held');
    await boot(LoopV1); // the run is held (here by an old worker: new_tool recorded where it calls old_tool)
    await runs().signal(id, 'next');
    const held = await driveUntilHeld(app, db, id);
    expect(held.error?.code).toBe('DURABLE_NON_DETERMINISM');
    const before = await check(id);
    expect(before).toMatchObject({ status: 'waiting', held: 'diverges' });
    expect(before.problems.join()).toMatch(
      /recorded step #3 as "new_tool" but the workflow now calls "old_tool"/,
    );
    await boot(LoopV2); // the fixed deploy: the check tells the held run replays now
    expect(await check(id)).toMatchObject({
      status: 'waiting',
      ended: 'end-of-record',
      held: 'replays',
      problems: [],
    });
    const all = await replayRuns(app, { kind: 'tool-loop' });
    expect(all.filter((r) => r.held)).toEqual([expect.objectContaining({ runId: id, held: 'replays' })]);
    expect(all.filter((r) => r.problems.length)).toEqual([]);
    expect(await runs().retryHeld('tool-loop')).toEqual({ retried: 1 });
    const parked = await drive(id, 3); // the signal sent before the hold is still there
    expect(parked.parkedReason).not.toMatch(/^held/);
    const done = await next(id);
    expect([done.status, done.output]).toEqual(['succeeded', { paths: ['old-0', 'new-1', 'new-2'] }]);
    const after = await check(id);
    expect(after).toMatchObject({ status: 'succeeded', problems: [] });
    expect(after.held).toBeUndefined();
  });
});
