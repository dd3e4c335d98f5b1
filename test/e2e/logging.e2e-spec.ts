import { INestApplication, Injectable } from '@nestjs/common';
import {
  RunContext,
  DurableStep,
  DurableWorkflow,
  IdempotentCommand,
  NonRetryableError,
  RedactHook,
  RunRepository,
} from '../../src';
import { bootModules, durableModule } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { DurableWorker } from '../../src/engine/worker.service';
import { Reconciler } from '../../src/maintenance/reconciler.service';
import { CapturingLogger } from '../helpers/capturing-logger';

const SECRET = 'card-4242-secret';

@Injectable()
class SlowSteps {
  @DurableStep({ name: 'log_slow_step' })
  async slow() {
    await new Promise((r) => setTimeout(r, 1500));
    return 'slow';
  }
}

@DurableWorkflow('log-slow')
class SlowWorkflow {
  constructor(private readonly s: SlowSteps) {}
  async run() {
    return this.s.slow();
  }
}

@DurableWorkflow('log-fails')
class FailingWorkflow {
  async run() {
    throw new NonRetryableError(`declined for ${SECRET}`);
  }
}

@DurableWorkflow('log-dies', { maxAttempts: 1 })
class DyingWorkflow {
  async run() {
    throw new Error(`vendor down for ${SECRET}`);
  }
}

@Injectable()
class QuickSteps {
  @DurableStep({ name: 'log_quick_step' })
  async quick() {
    return 'quick';
  }
}

@DurableWorkflow('log-progress')
class ProgressWorkflow {
  constructor(
    private readonly q: QuickSteps,
    private readonly s: SlowSteps,
  ) {}
  async run() {
    await this.q.quick();
    return this.s.slow();
  }
}

@DurableWorkflow('log-nap')
class NapWorkflow {
  async run(_input: unknown, ctx: RunContext) {
    await ctx.sleep(200); // long enough to park (a timer already due when the run blocks fires in place)
    return 'rested';
  }
}

@Injectable()
class Payouts {
  @IdempotentCommand({ name: 'payout', inDoubt: 'manual', requiresApproval: true })
  async payout(args: { amount: number }) {
    return { paid: args.amount };
  }
}

@DurableWorkflow('log-approval')
class ApprovalWorkflow {
  constructor(private readonly payouts: Payouts) {}
  async run(input: { amount: number }) {
    return this.payouts.payout({ amount: input.amount });
  }
}

async function until<T>(what: string, probe: () => T | undefined | false, ms = 10_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = probe();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('log lines', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase('logging');
  });
  afterAll(async () => {
    await db?.drop();
  });

  const boot = (
    logger: CapturingLogger,
    logRunData?: boolean,
    redact?: RedactHook,
  ): Promise<INestApplication> =>
    bootModules(
      {
        imports: [
          durableModule(db.url, {
            worker: {
              enabled: true,
              pollIntervalMs: 100,
              concurrency: 3,
              workerId: 'log-worker',
              drainTimeoutMs: 100,
            },
            logRunData,
            redact,
          }),
        ],
        providers: [FailingWorkflow, DyingWorkflow, ApprovalWorkflow, Payouts, SlowWorkflow, SlowSteps],
      },
      logger,
    );

  it('worker up, run failed, dead-lettered, parked for an operator: id and kind, no run data', async () => {
    const logger = new CapturingLogger();
    const app = await boot(logger);
    try {
      expect(logger.lines).toContainEqual({
        level: 'log',
        message: 'worker log-worker up: concurrency 3, kinds log-approval, log-dies, log-fails, log-slow',
      });
      const runs = app.get(RunRepository);
      const failed = (await runs.start('log-fails', { card: SECRET })).run.id;
      const dead = (await runs.start('log-dies', { card: SECRET })).run.id;
      const parked = (await runs.start('log-approval', { amount: 5 })).run.id;
      const line = (id: string, re: RegExp) =>
        until(`a line about ${id} matching ${re}`, () => logger.about(id).find((l) => re.test(l.message)));
      expect(await line(failed, /failed/)).toEqual({
        level: 'error',
        message: `run ${failed} (kind 'log-fails') failed`,
      });
      expect(await line(dead, /dead-lettered/)).toMatchObject({
        level: 'error',
        message: expect.stringContaining(`run ${dead} (kind 'log-dies') dead-lettered after 1 attempt(s)`),
      });
      expect(await line(parked, /parked for an operator/)).toMatchObject({
        level: 'log',
        message: expect.stringMatching(
          /^run \S+ \(kind 'log-approval'\) parked for an operator: awaiting approval of /,
        ),
      });
      expect(logger.lines.filter((l) => l.message.includes(SECRET))).toEqual([]);
      // The first boot on this database applied the module's migrations, and says so.
      expect(logger.lines.some((l) => /^applied \d+ migration\(s\) to schema public: /.test(l.message))).toBe(
        true,
      );
    } finally {
      await app.close();
    }
    // The drain says how it went (the parked run holds no worker: nothing was in flight at the end).
  });

  it('a drain says how many runs rested in the grace and how many were handed back', async () => {
    const logger = new CapturingLogger();
    const app = await boot(logger);
    const runs = app.get(RunRepository);
    const { run } = await runs.start('log-slow', {});
    for (let i = 0; i < 100 && (await runs.get(run.id))?.status !== 'running'; i++)
      await new Promise((r) => setTimeout(r, 50));
    await new Promise((r) => setTimeout(r, 100)); // its step body is under way
    await app.close();
    expect(logger.lines).toContainEqual({
      level: 'log',
      message:
        "worker log-worker drained: 0 of 1 run(s) reached a resting point in the grace, 1 handed back (1 due at their lease's end: a call was still in flight)",
    });
  });

  it('a takeover (the attempt before made no progress) is a log line; a plain resume a debug line', async () => {
    const logger = new CapturingLogger();
    const bootTicks = (workerId: string) =>
      bootModules(
        {
          imports: [durableModule(db.url, { worker: { workerId, leaseTtlMs: 60_000, heartbeatMs: 20_000 } })],
          providers: [SlowWorkflow, SlowSteps, NapWorkflow],
        },
        logger,
      );
    const app = await bootTicks('log-ticks');
    const taker = await bootTicks('log-taker');
    try {
      const runs = app.get(RunRepository);
      const worker = app.get(DurableWorker);
      const nap = (await runs.start('log-nap', {})).run.id;
      await worker.tick();
      await worker.idle(); // parked for 200 ms
      await new Promise((r) => setTimeout(r, 250));
      await worker.tick();
      await worker.idle();
      expect((await runs.get(nap))!.status).toBe('succeeded');
      expect(logger.about(nap)).toContainEqual({
        level: 'debug',
        message: `run ${nap} (kind 'log-nap') resumed by worker log-ticks at epoch 2`,
      });
      // A worker that froze past its lease: the reconciler hands the run back, another attempt takes it.
      const slow = (await runs.start('log-slow', {})).run.id;
      await worker.tick(); // its 1.5 s step is under way
      await db.query(`update ai_runs set lease_expires_at = now() - interval '1 second' where id = $1`, [
        slow,
      ]);
      await app.get(Reconciler).sweep();
      await db.query(`update ai_runs set available_at = now() where id = $1`, [slow]);
      await taker.get(DurableWorker).tick();
      await taker.get(DurableWorker).idle();
      expect(logger.about(slow)).toContainEqual({
        level: 'log',
        message: `run ${slow} (kind 'log-slow') taken over by worker log-taker at epoch 2: attempt 2 of 5 (the attempt before made no progress: a lost lease, a crash or an error)`,
      });
    } finally {
      await taker.close();
      await app.close();
    }
  });

  it('a drain with no run in flight says so in a log line', async () => {
    const logger = new CapturingLogger();
    const app = await boot(logger);
    await app.close();
    expect(logger.lines).toContainEqual({
      level: 'log',
      message: 'worker log-worker drained: no run was in flight',
    });
  });

  it('a takeover after a lost lease is a log line also when the attempt before made progress', async () => {
    const logger = new CapturingLogger();
    const bootTicks = (workerId: string) =>
      bootModules(
        {
          imports: [durableModule(db.url, { worker: { workerId, leaseTtlMs: 60_000, heartbeatMs: 20_000 } })],
          providers: [SlowSteps, QuickSteps, ProgressWorkflow],
        },
        logger,
      );
    const app = await bootTicks('log-killed');
    const taker = await bootTicks('log-taker');
    try {
      const runs = app.get(RunRepository);
      const id = (await runs.start('log-progress', {})).run.id;
      void app.get(DurableWorker).tick(); // its quick step commits, then its 1.5 s step is under way
      for (let i = 0; i < 100 && !(await runs.checkpoints(id)).length; i++)
        await new Promise((r) => setTimeout(r, 20));
      // As after a SIGKILL: the lease runs out, the reconciler hands the run back, another worker takes it.
      await db.query(`update ai_runs set lease_expires_at = now() - interval '1 second' where id = $1`, [id]);
      await app.get(Reconciler).sweep();
      await db.query(`update ai_runs set available_at = now() where id = $1`, [id]);
      await taker.get(DurableWorker).tick();
      await taker.get(DurableWorker).idle();
      expect((await runs.get(id))!.status).toBe('succeeded');
      expect(logger.about(id)).toContainEqual({
        level: 'log',
        message: `run ${id} (kind 'log-progress') taken over by worker log-taker at epoch 2: the claim before lost its lease (its worker died, froze or was released); it resumes from its last checkpoint`,
      });
      expect(logger.about(id).filter((l) => l.level === 'debug' && /resumed by/.test(l.message))).toEqual([]);
    } finally {
      await taker.close();
      await app.close();
    }
  });

  it('with logRunData: the error message is in the line', async () => {
    const logger = new CapturingLogger();
    const app = await boot(logger, true);
    try {
      const failed = (await app.get(RunRepository).start('log-fails', {})).run.id;
      const l = await until('the failed line', () =>
        logger.about(failed).find((x) => /failed/.test(x.message)),
      );
      expect(l.message).toBe(`run ${failed} (kind 'log-fails') failed: declined for ${SECRET}`);
    } finally {
      await app.close();
    }
  });

  it('with logRunData and a redact hook: the message in the line went through the hook as run.error', async () => {
    const logger = new CapturingLogger();
    const keys: string[] = [];
    const app = await boot(logger, true, (key, value) => {
      keys.push(key);
      return key === 'run.error'
        ? { ...value, message: String(value.message).replace(SECRET, '[card]') }
        : value;
    });
    try {
      const failed = (await app.get(RunRepository).start('log-fails', {})).run.id;
      const l = await until('the failed line', () =>
        logger.about(failed).find((x) => /failed/.test(x.message)),
      );
      expect(l.message).toBe(`run ${failed} (kind 'log-fails') failed: declined for [card]`);
      expect(logger.lines.some((x) => x.message.includes(SECRET))).toBe(false);
      expect(keys).toContain('run.error');
    } finally {
      await app.close();
    }
  });
});
