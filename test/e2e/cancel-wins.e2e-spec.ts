import { INestApplication, Injectable } from '@nestjs/common';
import {
  ChildRunError,
  DurableStep,
  DurableWorkflow,
  OnRunCancel,
  RunCancelInfo,
  RunContext,
  RunRepository,
} from '../../src';
import { DurableWorker } from '../../src/engine/worker.service';
import { setPausePointHook } from '../../src/testing';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil, gate } from '../helpers/drive';
import { waitFor } from '../helpers/processes';
import { TRAIL } from '../helpers/event-trail';

/**
 * Issue 35, part A: a cancel requested while a run's last step runs wins. Before, the step's commit
 * and `run.succeeded` followed the request (the heartbeat had not come yet): the run ended succeeded
 * and `onCancel` never ran. Also a cancel that commits between the last step's commit and the finish
 * (the finish checks the request in its own statement), and a child whose parent's wait timed out
 * while the child's last step ran (the parent got `timed_out`, the child ended succeeded).
 */
const calls: string[] = [];
let held = gate();

@Injectable()
class Tools {
  @DurableStep({ name: 'last' })
  async last(runId: string) {
    calls.push(`last:${runId}`);
    await held.promise;
    return { done: runId };
  }
}

@DurableWorkflow('cw-plain')
class PlainWorkflow {
  constructor(private readonly tools: Tools) {}
  async run(_input: unknown, ctx: RunContext) {
    return this.tools.last(ctx.runId);
  }
}

@DurableWorkflow('cw-cleanup')
class CleanupWorkflow implements OnRunCancel {
  constructor(private readonly tools: Tools) {}
  async run(_input: unknown, ctx: RunContext) {
    return this.tools.last(ctx.runId);
  }
  async onCancel(_input: unknown, ctx: RunContext, cancel: RunCancelInfo) {
    calls.push(`cleanup:${ctx.runId}:${cancel.reason}:${cancel.completed.map((c) => c.name).join(',')}`);
  }
}

@DurableWorkflow('cw-child')
class ChildWorkflow {
  constructor(private readonly tools: Tools) {}
  async run(_input: unknown, ctx: RunContext) {
    return this.tools.last(ctx.runId);
  }
}

@DurableWorkflow('cw-parent')
class ParentWorkflow {
  async run(_input: unknown, ctx: RunContext) {
    const child = await ctx.startChild(ChildWorkflow, {});
    try {
      return { child: await ctx.waitForChild(child, { timeoutMs: 300 }) };
    } catch (err) {
      if (err instanceof ChildRunError) return { childStatus: err.childStatus };
      throw err;
    }
  }
}

describe('a cancel during the last step wins (issue 35 A)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let runs: RunRepository;
  let worker: DurableWorker;

  beforeAll(async () => {
    db = await createTestDatabase('cancel_wins');
    // The default heartbeat (10 s): no heartbeat comes while the last step runs.
    app = await bootApp(db.url, [Tools, PlainWorkflow, CleanupWorkflow, ChildWorkflow, ParentWorkflow]);
    runs = app.get(RunRepository);
    worker = app.get(DurableWorker);
  });
  afterEach(() => setPausePointHook(null));
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  const trail = async (id: string) =>
    (
      (await db.query(`select event_type from ${TRAIL} t where run_id = $1 order by id`, [id])) as Array<{
        event_type: string;
      }>
    ).map((e) => e.event_type);

  /** Starts a run of `kind`, cancels it while its last step runs, then lets the step end. */
  async function cancelDuringLastStep(kind: string): Promise<string> {
    held = gate();
    const { run } = await runs.start(kind, {});
    await worker.tick();
    await waitFor(async () => calls.includes(`last:${run.id}`), 5000, 'the last step to run');
    const cancel = await runs.cancel(run.id, 'customer left');
    expect(cancel.cancelRequestedAt).toBeInstanceOf(Date); // requested, the run is still running
    held.open();
    await worker.idle();
    return run.id;
  }

  it.each([1, 2, 3])('with no onCancel, the run ends cancelled, never succeeded (try %i)', async () => {
    const id = await cancelDuringLastStep('cw-plain');
    const run = (await runs.get(id))!;
    expect(run.status).toBe('cancelled');
    expect(run.output).toBeNull();
    const events = await trail(id);
    expect(events).toContain('run.cancel_requested');
    expect(events).not.toContain('run.succeeded');
    expect(events.at(-1)).toBe('run.cancelled');
  });

  it.each([1, 2, 3])('with onCancel, the cleanup runs and the run ends cancelled (try %i)', async () => {
    const id = await cancelDuringLastStep('cw-cleanup');
    expect((await runs.get(id))!.status).toBe('cancelled');
    expect(calls).toContain(`cleanup:${id}:customer left:last`);
    expect(await trail(id)).not.toContain('run.succeeded');
  });

  /**
   * The cancel commits after the last step's commit (which therefore did not report it) and before
   * the finish: only the finish's own statement can see it.
   */
  async function cancelBeforeFinish(kind: string): Promise<string> {
    held = gate();
    held.open();
    let id = '';
    setPausePointHook(async (info) => {
      if (info.runId === id && info.point === 'after-write' && info.detail === 'run.checkpoint_saved')
        await runs.cancel(id, 'between commit and finish');
    });
    const { run } = await runs.start(kind, {});
    id = run.id;
    await worker.tick();
    await worker.idle();
    const saved = await db.query(
      `select count(*)::int as n from ai_checkpoints where run_id = $1 and step_name = 'last'`,
      [id],
    );
    expect(saved[0].n).toBe(1); // the step committed before the cancel (the premise)
    return id;
  }

  it('a cancel committed between the last commit and the finish: cancelled, not succeeded', async () => {
    const id = await cancelBeforeFinish('cw-plain');
    const run = (await runs.get(id))!;
    expect(run.status).toBe('cancelled');
    expect(run.error).toMatchObject({ code: 'DURABLE_RUN_CANCELLED' });
    expect((run.error as { message: string }).message).toContain('between commit and finish');
    expect((await trail(id)).slice(-2)).toEqual(['run.cancel_requested', 'run.cancelled']);
  });

  it('the same with onCancel: the finish keeps the run, the cleanup runs, then it ends cancelled', async () => {
    const id = await cancelBeforeFinish('cw-cleanup');
    expect((await runs.get(id))!.status).toBe('cancelled');
    expect(calls).toContain(`cleanup:${id}:between commit and finish:last`);
    expect(await trail(id)).not.toContain('run.succeeded');
  });

  it.each([1, 2, 3])(
    "a child's wait that times out while the child's last step runs: the child ends cancelled (try %i)",
    async () => {
      held = gate();
      const { run } = await runs.start(ParentWorkflow, {});
      await worker.tick(); // the parent starts its child and parks on the wait
      await worker.idle();
      await worker.tick(); // the child's step begins (held)
      const [child] = await db.query(`select id from ai_runs where parent_id = $1`, [run.id]);
      await waitFor(async () => calls.includes(`last:${child.id}`), 5000, "the child's step to run");
      // The parent's deadline passes while the child's step runs; the parent is claimed and times out.
      await new Promise((r) => setTimeout(r, 400));
      await db.query(`update ai_runs set available_at = now() where id = $1`, [run.id]);
      await worker.tick();
      await waitFor(
        async () => (await runs.get(child.id))!.cancelRequestedAt !== null,
        5000,
        "the parent's timeout to request the child's cancel",
      );
      held.open();
      await worker.idle();
      const parent = await driveUntil(app, db, run.id);
      const ended = (await runs.get(child.id))!;
      expect({ parent: parent.output, child: ended.status }).toEqual({
        parent: { childStatus: 'timed_out' },
        child: 'cancelled',
      });
    },
  );
});
