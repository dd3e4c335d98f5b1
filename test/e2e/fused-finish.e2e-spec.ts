import { INestApplication, Injectable } from '@nestjs/common';
import {
  CommandContext,
  DurableStep,
  DurableWorkflow,
  IdempotentCommand,
  NonRetryableError,
  RunContext,
  RunRepository,
} from '../../src';
import { DurableWorker } from '../../src/engine/worker.service';
import { DurableDatabase } from '../../src/store/durable-database';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil, gate } from '../helpers/drive';
import { waitFor } from '../helpers/processes';
import { TRAIL } from '../helpers/event-trail';

/**
 * Issue 38: the last step's commit rides on the finish (HeldStep). A step whose result is followed
 * only by `return` costs no statement of its own: its checkpoint, cursor and event are written by the
 * finish, in the same transaction. Anything else that follows it (a step, a command, a plain await
 * that outlives the event-loop turn) finds it durable first.
 */
let db: TestDatabase;
const seen: Record<string, number> = {};
let held = gate();

const checkpoints = async (runId: string, name: string): Promise<number> =>
  (
    await db.query(`select count(*)::int as n from ai_checkpoints where run_id = $1 and step_name = $2`, [
      runId,
      name,
    ])
  )[0].n;

@Injectable()
class Steps {
  @DurableStep({ name: 'first' })
  async first(runId: string) {
    return { runId, at: 'first' };
  }
  @DurableStep({ name: 'second' })
  async second(runId: string) {
    seen[`second:${runId}`] = await checkpoints(runId, 'first'); // the first is durable before this body
    return 'second';
  }
  @DurableStep({ name: 'gated' })
  async gated() {
    await held.promise;
    return 'gated';
  }
  @IdempotentCommand({ name: 'notify', inDoubt: 'retry-with-key' })
  async notify(args: { runId: string }, _ctx?: CommandContext) {
    seen[`notify:${args.runId}`] = await checkpoints(args.runId, 'first');
    return 'sent';
  }
}

@DurableWorkflow('ff-one')
class OneStep {
  constructor(private readonly s: Steps) {}
  async run(_input: unknown, ctx: RunContext) {
    return this.s.first(ctx.runId);
  }
}

@DurableWorkflow('ff-three')
class ThreeSteps {
  constructor(private readonly s: Steps) {}
  async run(_input: unknown, ctx: RunContext) {
    await this.s.first(ctx.runId);
    await this.s.second(ctx.runId);
    return this.s.gated();
  }
}

@DurableWorkflow('ff-plain-await')
class PlainAwait {
  constructor(private readonly s: Steps) {}
  async run(_input: unknown, ctx: RunContext) {
    const out = await this.s.first(ctx.runId);
    await new Promise((r) => setTimeout(r, 30)); // not durable: the held commit does not wait for it
    seen[`plain:${ctx.runId}`] = await checkpoints(ctx.runId, 'first');
    return out;
  }
}

@DurableWorkflow('ff-command')
class StepThenCommand {
  constructor(private readonly s: Steps) {}
  async run(_input: unknown, ctx: RunContext) {
    await this.s.first(ctx.runId);
    return this.s.notify({ runId: ctx.runId });
  }
}

@DurableWorkflow('ff-throws')
class StepThenThrow {
  constructor(private readonly s: Steps) {}
  async run(_input: unknown, ctx: RunContext) {
    await this.s.first(ctx.runId);
    throw new NonRetryableError('refused after the step');
  }
}

@DurableWorkflow('ff-cancel')
class CancelDuringLast {
  constructor(private readonly s: Steps) {}
  async run() {
    return this.s.gated();
  }
}

describe('the last step commit fused into the finish (issue 38)', () => {
  let app: INestApplication;
  let runs: RunRepository;
  let worker: DurableWorker;
  /** Named statements sent, with the run id they were bound to. */
  const sent: Array<{ name: string; runId: unknown }> = [];

  beforeAll(async () => {
    db = await createTestDatabase('fused_finish');
    app = await bootApp(db.url, [
      Steps,
      OneStep,
      ThreeSteps,
      PlainAwait,
      StepThenCommand,
      StepThenThrow,
      CancelDuringLast,
    ]);
    runs = app.get(RunRepository);
    worker = app.get(DurableWorker);
    const query = DurableDatabase.prototype.query;
    jest.spyOn(DurableDatabase.prototype, 'query').mockImplementation(function (
      this: DurableDatabase,
      ...args: Parameters<DurableDatabase['query']>
    ) {
      if (args[2]) sent.push({ name: args[2], runId: args[1]?.[0] });
      return query.apply(this, args);
    } as DurableDatabase['query']);
  });
  afterAll(async () => {
    jest.restoreAllMocks();
    await app?.close();
    await db?.drop();
  });

  const statements = (runId: string, name: string) =>
    sent.filter((s) => s.runId === runId && s.name === name).length;
  const trail = async (id: string): Promise<string[]> =>
    (await db.query(`select event_type from ${TRAIL} t where run_id = $1 order by id`, [id])).map(
      (e: { event_type: string }) => e.event_type,
    );
  /** The step's checkpoint was written by the transaction that last wrote the run row (its finish). */
  const writtenByFinish = async (id: string, index: number): Promise<boolean> =>
    (
      await db.query(
        `select (select xmin::text from ai_checkpoints where run_id = $1 and step_index = $2)
              = (select xmin::text from ai_runs where id = $1) as same`,
        [id, index],
      )
    )[0].same;

  it('a 1-step run: one statement after the claim, checkpoint and finish in one transaction', async () => {
    const { run } = await runs.start(OneStep, {});
    expect((await driveUntil(app, db, run.id)).status).toBe('succeeded');
    expect(statements(run.id, 'dx_step_write')).toBe(0);
    expect(statements(run.id, 'dx_finish')).toBe(1);
    expect(await writtenByFinish(run.id, 0)).toBe(true);
    expect((await trail(run.id)).slice(-2)).toEqual(['run.checkpoint_saved', 'run.succeeded']);
    const [row] = await db.query(`select cursor, attempts, output from ai_runs where id = $1`, [run.id]);
    expect(row.cursor).toMatchObject({ step: 0, name: 'first', status: 'done' });
    expect(row.attempts).toBe(0);
    expect(row.output).toEqual({ runId: run.id, at: 'first' });
    const [ev] = await db.query(
      `select payload from ${TRAIL} t where run_id = $1 and event_type = 'run.checkpoint_saved'`,
      [run.id],
    );
    expect(ev.payload).toEqual({ step: 0, name: 'first', kind: 'compute' });
  });

  it('a 3-step run: the first two are written alone (before the next body), only the last is fused', async () => {
    held = gate();
    held.open();
    const { run } = await runs.start(ThreeSteps, {});
    expect((await driveUntil(app, db, run.id)).status).toBe('succeeded');
    expect(seen[`second:${run.id}`]).toBe(1);
    expect(statements(run.id, 'dx_step_write')).toBe(2);
    expect(statements(run.id, 'dx_finish')).toBe(1);
    expect(await writtenByFinish(run.id, 2)).toBe(true);
    expect(await writtenByFinish(run.id, 0)).toBe(false);
    expect(await trail(run.id)).toEqual([
      'run.created',
      'run.claimed',
      'run.checkpoint_saved',
      'run.checkpoint_saved',
      'run.checkpoint_saved',
      'run.succeeded',
    ]);
  });

  it('a plain await after the step: the commit is written alone on the next turn, not held for it', async () => {
    const { run } = await runs.start(PlainAwait, {});
    expect((await driveUntil(app, db, run.id)).status).toBe('succeeded');
    expect(seen[`plain:${run.id}`]).toBe(1);
    expect(statements(run.id, 'dx_step_write')).toBe(1);
    expect(await writtenByFinish(run.id, 0)).toBe(false);
  });

  it('a command after the step: the step is durable before the command is reserved and sent', async () => {
    const { run } = await runs.start(StepThenCommand, {});
    expect((await driveUntil(app, db, run.id)).status).toBe('succeeded');
    expect(seen[`notify:${run.id}`]).toBe(1);
    expect(statements(run.id, 'dx_step_write')).toBe(1);
  });

  it('a run that throws after its step: the step commit rides on the failure', async () => {
    const { run } = await runs.start(StepThenThrow, {});
    expect((await driveUntil(app, db, run.id)).status).toBe('failed');
    expect(statements(run.id, 'dx_step_write')).toBe(0);
    expect(await writtenByFinish(run.id, 0)).toBe(true);
    expect((await trail(run.id)).slice(-2)).toEqual(['run.checkpoint_saved', 'run.failed']);
  });

  it('a cancel requested while the last step runs wins over the fused commit', async () => {
    held = gate();
    let entered = false;
    const { run } = await runs.start(CancelDuringLast, {});
    const watching = waitFor(
      async () =>
        (entered =
          (await db.query(`select 1 from ai_runs where id = $1 and status = 'running'`, [run.id])).length >
          0),
      5000,
      'the run to be claimed',
    );
    await worker.tick();
    await watching;
    expect(entered).toBe(true);
    await runs.cancel(run.id, 'changed my mind');
    held.open();
    await worker.idle();
    const ended = (await runs.get(run.id))!;
    expect(ended.status).toBe('cancelled');
    expect(ended.output).toBeNull();
    expect(statements(run.id, 'dx_step_write')).toBe(0);
    expect(await checkpoints(run.id, 'gated')).toBe(1); // the step did complete: its record is kept
    expect((await trail(run.id)).slice(-3)).toEqual([
      'run.cancel_requested',
      'run.checkpoint_saved',
      'run.cancelled',
    ]);
  });
});
