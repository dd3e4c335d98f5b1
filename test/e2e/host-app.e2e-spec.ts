import { Injectable, ModuleMetadata } from '@nestjs/common';
import { CronExpression, Interval, ScheduleModule, SchedulerRegistry } from '@nestjs/schedule';
import * as nestTypeorm from '@nestjs/typeorm';
import {
  DurableDataSource,
  DURABLE_JOB_NAMES,
  DurableExecutionModule,
  DurableStep,
  DurableWorkflow,
  InvalidOptionsError,
  RunContext,
  RunRepository,
} from '../../src';
import { DurableRetentionModule } from '../../src/maintenance/retention';
import { DurableDatabase } from '../../src/store/durable-database';
import { bootApp, bootError, bootModules } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';

/** Fitting into an existing Nest app: its own typeorm copy, its own ScheduleModule. */

@DurableWorkflow('host-echo')
class HostEchoWorkflow {
  async run(input: unknown) {
    return input;
  }
}

/** Misuses the context: ctx.progress() belongs inside a @DurableStep. */
@DurableWorkflow('host-misuse', { maxAttempts: 1 })
class MisuseWorkflow {
  async run(_input: unknown, ctx: RunContext) {
    await ctx.progress(1, {});
    return this.noop();
  }

  @DurableStep()
  async noop() {
    return null;
  }
}

/** Resolved when the slow step's body begins (a drain before that stops the run at the step boundary). */
let slowBegan: () => void = () => undefined;

@Injectable()
class SlowSteps {
  @DurableStep({ name: 'host_slow_step' })
  async slow(ms: number) {
    slowBegan();
    await new Promise((r) => setTimeout(r, ms));
    return 'slept';
  }
}

@DurableWorkflow('host-slow')
class SlowWorkflow {
  constructor(private readonly steps: SlowSteps) {}
  async run(input: { ms: number }) {
    return this.steps.slow(input.ms);
  }
}

@Injectable()
class AppTicker {
  static ticks = 0;
  @Interval(100)
  tick() {
    AppTicker.ticks++;
  }
}

const OFF = { worker: { enabled: false }, reconciler: { enabled: false } } as const;

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase('host_app');
});

afterAll(async () => {
  await db?.drop();
});

const boot = (imports: ModuleMetadata['imports'], providers: ModuleMetadata['providers'] = []) =>
  bootModules({ imports, providers });

async function waitForStatus(runs: RunRepository, id: string, status: string, ms = 10_000) {
  const until = Date.now() + ms;
  for (;;) {
    const run = await runs.get(id);
    if (run?.status === status) return run;
    if (Date.now() > until) throw new Error(`run ${id} is ${run?.status}, not ${status}, after ${ms} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('fitting into an existing app', () => {
  describe('a DataSource from another copy of typeorm', () => {
    /** A second, separately loaded typeorm: its DataSource class is not ours (as with two installs). */
    let Other: typeof import('typeorm');
    beforeAll(() => {
      jest.isolateModules(() => {
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        Other = require('typeorm');
      });
      expect(Other.DataSource).not.toBe(nestTypeorm.getDataSourceToken());
    });
    afterEach(() => jest.dontMock('@nestjs/typeorm'));

    it('database.dataSource accepts it (typed structurally) and migrates through it', async () => {
      const fresh = await createTestDatabase('host_other_ds');
      const other = new Other.DataSource({ type: 'postgres', url: fresh.url });
      try {
        const dataSource: DurableDataSource = other; // compiles: only the members the module uses
        const app = await boot(
          [DurableExecutionModule.forRoot({ database: { dataSource }, ...OFF })],
          [HostEchoWorkflow],
        );
        try {
          expect(app.get(DurableDatabase).dataSource).toBe(other);
          const { run } = await app.get(RunRepository).start('host-echo', { n: 1 });
          expect(await fresh.query(`select kind from ai_runs where id = $1`, [run.id])).toEqual([
            { kind: 'host-echo' },
          ]);
        } finally {
          await app.close();
        }
        expect(other.isInitialized).toBe(true); // given, never destroyed
      } finally {
        if (other.isInitialized) await other.destroy();
        await fresh.drop();
      }
    });

    it("database.dataSourceName resolves through @nestjs/typeorm's own getDataSourceToken", async () => {
      const other = new Other.DataSource({ type: 'postgres', url: db.url });
      // The app's @nestjs/typeorm is bound to the app's typeorm: its token for 'default' is that copy's class.
      jest.doMock('@nestjs/typeorm', () => ({
        ...jest.requireActual('@nestjs/typeorm'),
        getDataSourceToken: (name = 'default') =>
          name === 'default' ? Other.DataSource : `${name}DataSource`,
      }));
      try {
        const app = await boot(
          [DurableExecutionModule.forRoot({ database: { dataSourceName: 'default' }, ...OFF })],
          [HostEchoWorkflow, { provide: Other.DataSource, useValue: other }],
        );
        try {
          expect(app.get(DurableDatabase).dataSource).toBe(other);
          expect(other.isInitialized).toBe(true);
        } finally {
          await app.close();
        }
      } finally {
        if (other.isInitialized) await other.destroy();
      }
    });

    it('a missing DataSource names the tokens tried and the two-typeorm suspicion', async () => {
      const err = await bootError({
        imports: [DurableExecutionModule.forRoot({ database: { dataSourceName: 'analytics' }, ...OFF })],
      });
      expect(err).toBeInstanceOf(InvalidOptionsError);
      const message = (err as Error).message;
      expect(message).toContain("no TypeORM DataSource named 'analytics' is registered");
      expect(message).toContain("looked up under 'analyticsDataSource'");
      expect(message).toContain('npm ls typeorm');
    });
  });

  it('an app with its own ScheduleModule: its @Interval fires once per period, and the worker still runs', async () => {
    const app = await boot(
      [
        ScheduleModule.forRoot(),
        DurableExecutionModule.forRoot({
          database: { url: db.url },
          worker: { enabled: true, pollIntervalMs: 100 },
          reconciler: { enabled: true, intervalMs: 500 },
        }),
      ],
      [AppTicker, HostEchoWorkflow],
    );
    try {
      // The module's jobs are the app's jobs: listed (and stoppable) in its SchedulerRegistry.
      const registry = app.get(SchedulerRegistry);
      expect(registry.getIntervals()).toEqual(
        expect.arrayContaining([DURABLE_JOB_NAMES.workerPoll, DURABLE_JOB_NAMES.reconciler]),
      );
      AppTicker.ticks = 0;
      await new Promise((r) => setTimeout(r, 1000));
      const ticks = AppTicker.ticks;
      expect(ticks).toBeGreaterThanOrEqual(7);
      expect(ticks).toBeLessThanOrEqual(13); // ~20 when two schedule explorers register it twice
      const runs = app.get(RunRepository);
      const { run } = await runs.start('host-echo', { hello: 'worker' });
      const done = await waitForStatus(runs, run.id, 'succeeded');
      expect(done.output).toEqual({ hello: 'worker' });
    } finally {
      await app.close();
    }
  });

  it('cadences as cron expressions: the reconciler and retention are cron jobs of the app; a drain still works after @nestjs/schedule cleared its jobs', async () => {
    const app = await boot(
      [
        ScheduleModule.forRoot(),
        DurableExecutionModule.forRoot({
          database: { url: db.url },
          worker: {
            enabled: true,
            pollIntervalMs: 100,
            drainTimeoutMs: 5000,
            heartbeatMs: 100,
            leaseTtlMs: 1000,
          },
          reconciler: { enabled: true, cron: CronExpression.EVERY_SECOND },
        }),
        DurableRetentionModule.forRoot({ pruneAfterMs: 86_400_000, cron: CronExpression.EVERY_DAY_AT_3AM }),
      ],
      [SlowWorkflow, SlowSteps],
    );
    let closed = false;
    try {
      const registry = app.get(SchedulerRegistry);
      expect([...registry.getCronJobs().keys()].sort()).toEqual([
        DURABLE_JOB_NAMES.reconciler,
        DURABLE_JOB_NAMES.retention,
      ]);
      expect(registry.getCronJobs().get(DURABLE_JOB_NAMES.retention)!.cronTime.source).toBe('0 03 * * *');
      expect(registry.getIntervals()).toContain(DURABLE_JOB_NAMES.workerPoll);
      const runs = app.get(RunRepository);
      const began = new Promise<void>((r) => (slowBegan = r));
      const { run } = await runs.start('host-slow', { ms: 1500 });
      // Running is not enough: a drain that begins before the step's body would stop the run at that
      // step boundary (released, as it should be), and this test is about a call in flight.
      await began;
      // Closing: @nestjs/schedule clears every job, the worker drains on its own heartbeat meanwhile
      // (a 1.5 s step against a 1 s lease): the run finishes here, never taken over.
      await app.close();
      closed = true;
      const after = await db.query(`select status, epoch from ai_runs where id = $1`, [run.id]);
      expect(after).toEqual([{ status: 'succeeded', epoch: '1' }]);
      expect(registry.getCronJobs().size).toBe(0);
    } finally {
      if (!closed) await app.close();
    }
  });

  it('a producer-only process (no workflows, worker off) starts a run a separate worker finishes', async () => {
    const producer = await bootApp(db.url, [], { defaultMaxAttempts: 7 }); // worker.enabled: false
    const worker = await bootApp(db.url, [HostEchoWorkflow], {
      worker: { enabled: true, pollIntervalMs: 100 },
    });
    try {
      const runs = producer.get(RunRepository);
      const { run, created } = await runs.start(
        'host-echo',
        { from: 'api' },
        { idempotencyKey: 'producer-1' },
      );
      expect(created).toBe(true);
      expect(run).toMatchObject({ kind: 'host-echo', maxAttempts: 7 });
      // Idempotent as usual.
      expect((await runs.start('host-echo', { from: 'api' }, { idempotencyKey: 'producer-1' })).created).toBe(
        false,
      );
      const done = await waitForStatus(worker.get(RunRepository), run.id, 'succeeded');
      expect(done.output).toEqual({ from: 'api' });
      // Arguments are still checked before anything is written.
      await expect(runs.start('', {})).rejects.toMatchObject({ code: 'DURABLE_INVALID_ARGUMENT' });
    } finally {
      await worker.close();
      await producer.close();
    }
  });

  it('misusing the context is a typed error with code DURABLE_MISUSE, kept on the run, which fails once', async () => {
    const app = await bootApp(db.url, [MisuseWorkflow], { worker: { enabled: true, pollIntervalMs: 100 } });
    try {
      const runs = app.get(RunRepository);
      const { run } = await runs.start('host-misuse', {});
      // A bug in the calling code: retrying cannot help (issue 19 items 10, 11), so not dead-lettered.
      const dead = await waitForStatus(runs, run.id, 'failed');
      expect(dead.error).toMatchObject({
        name: 'DurableUsageError',
        code: 'DURABLE_MISUSE',
        message: 'ctx.progress() must be called inside a @DurableStep method',
      });
    } finally {
      await app.close();
    }
  });
});
