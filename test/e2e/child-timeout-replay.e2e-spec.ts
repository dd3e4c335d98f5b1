import { INestApplication, Injectable } from '@nestjs/common';
import { ChildRunError, DurableStep, DurableWorkflow, RunContext, RunRepository } from '../../src';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { waitFor } from '../helpers/processes';

/**
 * Issue 35 (found by the differential test, test/diff): a child wait that timed out, replayed. The
 * replay re-sent the child's cancel (for records older than `cancel_first`) and awaited that write
 * before rejecting; meanwhile replay delivered the next recorded results (one per turn), so a step
 * that settled after the timeout in the first execution reached the workflow before it in the replay.
 * The run's output (the last claim's) then said the step came first: a replay must repeat the order.
 */
@DurableWorkflow('ctr-forever')
class Forever {
  async run(_input: unknown, ctx: RunContext) {
    return ctx.waitForSignal('never');
  }
}

@Injectable()
class Slow {
  @DurableStep({ name: 'ctr_slow' })
  async slow(ms: number) {
    await new Promise((r) => setTimeout(r, ms));
    return 'step';
  }
}

@DurableWorkflow('ctr-parent')
class Parent {
  constructor(private readonly s: Slow) {}
  async run(_input: unknown, ctx: RunContext) {
    const seen: string[] = [];
    await Promise.allSettled([
      ctx.child(Forever, {}, { timeoutMs: 200 }).catch((e: ChildRunError) => {
        seen.push(`child:${e.childStatus}`);
      }),
      this.s.slow(900).then((v) => seen.push(v)),
    ]);
    await ctx.sleep(100); // parks: the next claim replays everything above
    return seen;
  }
}

describe('a timed-out child wait, replayed, keeps its place', () => {
  let db: TestDatabase;
  let app: INestApplication;

  beforeAll(async () => {
    db = await createTestDatabase('child_timeout_replay');
    app = await bootApp(db.url, [Forever, Slow, Parent], {
      worker: { enabled: true, pollIntervalMs: 50 },
    });
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('the replay delivers the timeout before the step that settled after it', async () => {
    const runs = app.get(RunRepository);
    const { run } = await runs.start(Parent, {});
    await waitFor(
      async () => ['succeeded', 'failed'].includes((await runs.get(run.id))!.status),
      15_000,
      'the parent to end',
    );
    const view = (await runs.get(run.id))!;
    expect(view.status).toBe('succeeded');
    expect(view.epoch).toBeGreaterThan(1); // it parked and was replayed
    expect(view.output).toEqual(['child:timed_out', 'step']);
  }, 30_000);
});
