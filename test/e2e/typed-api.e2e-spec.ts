import { INestApplication } from '@nestjs/common';
import { DurableWorkflow, InvalidArgumentError, RunContext, RunRepository } from '../../src';
import { driveRun } from '../../src/testing';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';

/**
 * Issue 20, item 3: the typed calls at run time (their types are checked by test/types). A typed signal
 * reaches the workflow as declared; `signal(Class, id, …)` and `result(Class, id)` refuse a run of
 * another kind (a signal no wait of that run would ever take), storing nothing; a `Date` the workflow
 * returns is what its type says: a string.
 */

interface Decisions {
  approve: { by: string };
}

@DurableWorkflow('typed-approval')
class ApprovalWorkflow {
  async run(input: { order: string }, ctx: RunContext<Decisions>) {
    const { by } = await ctx.waitForSignal('approve');
    return { order: input.order, by, decidedAt: new Date(Date.UTC(2026, 11, 1)) };
  }
}

@DurableWorkflow('typed-other')
class OtherWorkflow {
  async run(_input: unknown, ctx: RunContext) {
    return ctx.waitForSignal<{ n: number }>('go');
  }
}

describe('typed signals and results at run time', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let runs: RunRepository;

  beforeAll(async () => {
    db = await createTestDatabase('typed_api');
    app = await bootApp(db.url, [ApprovalWorkflow, OtherWorkflow]);
    runs = app.get(RunRepository);
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('a typed signal reaches the workflow; result(Class, id) gives the stored output (a Date as its ISO string)', async () => {
    const { run } = await runs.start(ApprovalWorkflow, { order: 'o-7' });
    expect((await driveRun(app, run.id, ['waiting'], 5)).parkedReason).toBe('waiting for signal "approve"');
    await runs.signal(ApprovalWorkflow, run.id, 'approve', { by: 'ann' });
    await driveRun(app, run.id, ['succeeded', 'failed'], 5);
    const out = await runs.result(ApprovalWorkflow, run.id, { timeoutMs: 1000 });
    expect(out).toEqual({ order: 'o-7', by: 'ann', decidedAt: '2026-12-01T00:00:00.000Z' });
    expect(typeof out.decidedAt).toBe('string');
  });

  it('signal(Class, id) to a run of another kind is refused, naming both kinds, and stores nothing', async () => {
    const { run } = await runs.start(OtherWorkflow, {});
    await driveRun(app, run.id, ['waiting'], 5);
    const err = await runs
      .signal(ApprovalWorkflow, run.id, 'approve', { by: 'ann' })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidArgumentError);
    expect((err as Error).message).toContain(`names a run of kind 'typed-other', not 'typed-approval'`);
    const stored = await db.query(`select count(*)::int as n from ai_signals where run_id = $1`, [run.id]);
    expect(stored[0].n).toBe(0);
    expect((await runs.events(run.id)).map((e) => e.type)).not.toContain('signal.sent');
    // The same run takes its own signal, untyped.
    await runs.signal(OtherWorkflow, run.id, 'go', { n: 3 });
    await driveRun(app, run.id, ['succeeded', 'failed'], 5);
    await expect(runs.result(OtherWorkflow, run.id)).resolves.toEqual({ n: 3 });
    const wrong = await runs.result(ApprovalWorkflow, run.id).catch((e: unknown) => e);
    expect(wrong).toBeInstanceOf(InvalidArgumentError);
    expect((wrong as Error).message).toContain(`names a run of kind 'typed-other', not 'typed-approval'`);
  });

  it('a class without @DurableWorkflow is a usage error that names the call', async () => {
    class Plain {
      async run(_i: unknown, _c: RunContext) {
        return 1;
      }
    }
    const id = '00000000-0000-4000-8000-000000000000';
    await expect(runs.signal(Plain, id, 'x', null)).rejects.toThrow(/RunRepository\.signal\(Plain, …\)/);
    await expect(runs.result(Plain, id)).rejects.toThrow(/RunRepository\.result\(Plain, …\)/);
  });
});
