import { INestApplication, Injectable, Type } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import {
  DurableExecutionModule,
  DurableStep,
  DurableWorkflow,
  InvalidOptionsError,
  RunContext,
  RunNotFoundError,
  RunRepository,
} from '../../src';
import {
  DurableRetention,
  DurableRetentionModule,
  DurableRetentionOptions,
} from '../../src/maintenance/retention';
import { bootModules, durableModule } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil } from '../helpers/drive';

/**
 * Retention against real PostgreSQL: old finished runs lose their events, checkpoints and signals in
 * batches; live runs, retryable (failed/dead-lettered) runs and recent runs keep everything and still
 * replay; whole runs past the second horizon are deleted; the interval is registered and runs by itself.
 */
const executions: Record<string, number> = {};
let broken = false;

@Injectable()
class Steps {
  private count(name: string) {
    executions[name] = (executions[name] ?? 0) + 1;
  }
  @DurableStep({ name: 'one' })
  async one() {
    this.count('one');
    return 1;
  }
  @DurableStep({ name: 'two' })
  async two() {
    this.count('two');
    if (broken) throw new Error('vendor down');
    return 2;
  }
}

@DurableWorkflow('job', { maxAttempts: 1 })
class Job {
  constructor(private readonly s: Steps) {}
  async run(input: { wait?: boolean }, ctx: RunContext) {
    const a = await this.s.one();
    if (input.wait) await ctx.waitForSignal('go');
    return a + (await this.s.two());
  }
}

const providers: Type<unknown>[] = [Steps, Job];
const DAY = 86_400_000;

const boot = (url: string, retention: DurableRetentionOptions): Promise<INestApplication> =>
  bootModules({ imports: [durableModule(url), DurableRetentionModule.forRoot(retention)], providers });

describe('retention', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let runs: RunRepository;
  const age = (ids: string[], days: number) =>
    db.query(
      `update ai_runs set created_at = now() - $2 * interval '1 day',
              finished_at = case when finished_at is not null then now() - $2 * interval '1 day' + interval '1 minute' end
        where id = any($1)`,
      [ids, days],
    );
  const count = async (table: string, id: string) =>
    Number((await db.query(`select count(*) as n from ${table} where run_id = $1`, [id]))[0].n);

  beforeAll(async () => {
    db = await createTestDatabase('retention');
    app = await boot(db.url, {
      pruneAfterMs: 7 * DAY,
      deleteRunsAfterMs: 365 * DAY,
      batchSize: 2,
      enabled: false,
    });
    runs = app.get(RunRepository);
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('refuses bad options, listing every field', () => {
    expect(() => DurableRetentionModule.forRoot({ pruneAfterMs: 0, batchSize: 1.5 })).toThrow(
      InvalidOptionsError,
    );
    expect(() => DurableRetentionModule.forRoot({ pruneAfterMs: -1, batchSize: 1.5 })).toThrow(
      /pruneAfterMs[\s\S]*batchSize/,
    );
  });

  it('prunes old finished runs in batches and leaves live, retryable and recent runs whole', async () => {
    const done: string[] = [];
    for (let i = 0; i < 5; i++) {
      const { run } = await runs.start('job', {});
      await driveUntil(app, db, run.id);
      done.push(run.id);
    }
    const cancelled = (await runs.start('job', { wait: true })).run.id;
    await driveUntil(app, db, cancelled, ['waiting']);
    await runs.cancel(cancelled, 'no longer needed', 'ops');
    const recent = (await runs.start('job', {})).run.id;
    await driveUntil(app, db, recent);
    broken = true;
    const dead = (await runs.start('job', {})).run.id;
    expect((await driveUntil(app, db, dead)).status).toBe('dead_lettered');
    broken = false;
    const live = (await runs.start('job', { wait: true })).run.id;
    await driveUntil(app, db, live, ['waiting']);
    await runs.signal(live, 'go', { early: true }); // stored, not yet consumed: the live run needs it
    await age([...done, cancelled, live, dead], 30);

    const liveBefore = { cp: await count('ai_checkpoints', live), ev: await count('ai_events', live) };
    const deadBefore = { cp: await count('ai_checkpoints', dead), ev: await count('ai_events', dead) };
    const result = await app.get(DurableRetention).sweep();
    expect(result).toMatchObject({ prunedRuns: 6, deletedRuns: 0 });
    expect(result.batches).toBe(4 + 1); // 2 + 2 + 2 + 0 runs, then one delete statement finding none
    expect(result.checkpoints).toBe(5 * 2 + 2); // one, two / one, $deadline:go
    expect(result.signals).toBe(0);

    for (const id of [...done, cancelled]) {
      expect(await count('ai_checkpoints', id)).toBe(0);
      const events = await runs.events(id);
      expect(events.map((e) => e.type)).toEqual(['run.pruned']);
      expect(events[0].payload).toMatchObject({ by: 'retention', checkpoints: expect.any(Number) });
      const run = (await runs.get(id))!;
      expect(run.state).toMatchObject({ retention: { prunedAt: expect.any(String) } });
      expect(['succeeded', 'cancelled']).toContain(run.status); // the summary row stays
    }
    expect((await runs.get(done[0]))!.output).toBe(3);
    expect({ cp: await count('ai_checkpoints', live), ev: await count('ai_events', live) }).toEqual(
      liveBefore,
    );
    expect(await count('ai_signals', live)).toBe(1);
    expect({ cp: await count('ai_checkpoints', dead), ev: await count('ai_events', dead) }).toEqual(
      deadBefore,
    );
    expect(await count('ai_checkpoints', recent)).toBe(2);

    // The live run resumes from its checkpoints; the dead-lettered one retries from its last checkpoint.
    const before = { ...executions };
    expect((await driveUntil(app, db, live)).output).toBe(3);
    await runs.retry(dead, 'ops');
    expect((await driveUntil(app, db, dead)).output).toBe(3);
    expect(executions.one - before.one).toBe(0); // replayed, never re-run
    expect(executions.two - before.two).toBe(2); // each run's step two, once

    expect(await app.get(DurableRetention).sweep()).toMatchObject({ prunedRuns: 0, deletedRuns: 0 });
  });

  it('deletes whole finished runs past the second horizon; a retry then says the run is gone', async () => {
    broken = true;
    const dead = (await runs.start('job', {})).run.id;
    await driveUntil(app, db, dead);
    broken = false;
    const old = (await runs.start('job', {})).run.id;
    await driveUntil(app, db, old);
    const waiting = (await runs.start('job', { wait: true })).run.id;
    await driveUntil(app, db, waiting, ['waiting']);
    await age([dead, old, waiting], 400);
    const waitingCheckpoints = await count('ai_checkpoints', waiting);
    const result = await app.get(DurableRetention).sweep();
    expect(result.deletedRuns).toBeGreaterThanOrEqual(2);
    expect(await runs.get(dead)).toBeNull();
    expect(await runs.get(old)).toBeNull();
    await expect(runs.retry(dead, 'ops')).rejects.toBeInstanceOf(RunNotFoundError);
    expect((await runs.get(waiting))!.status).toBe('waiting'); // live, however old
    expect(await count('ai_checkpoints', waiting)).toBe(waitingCheckpoints);
  });

  it('forRootAsync takes its options from a factory and validates them when it resolves', async () => {
    const build = (pruneAfterMs: number) =>
      Test.createTestingModule({
        imports: [
          DurableExecutionModule.forRoot({ database: { url: db.url }, worker: { enabled: false } }),
          DurableRetentionModule.forRootAsync({
            // Stands in for ConfigModule: a module that exports what the factory injects.
            imports: [
              {
                module: class RetentionConfigModule {},
                providers: [{ provide: 'RETENTION_MS', useValue: pruneAfterMs }],
                exports: ['RETENTION_MS'],
              },
            ],
            inject: ['RETENTION_MS'],
            useFactory: async (ms: number) => ({ pruneAfterMs: ms, enabled: false }),
          }),
        ],
      }).compile();
    const ok = await build(DAY);
    expect(ok.get(DurableRetention)).toBeInstanceOf(DurableRetention);
    await ok.close();
    await expect(build(0)).rejects.toThrow('retention.pruneAfterMs must be a positive integer');
  });

  it('sweeps on its interval, a timer of its own cleared at shutdown', async () => {
    const other = await boot(db.url, { pruneAfterMs: DAY, intervalMs: 100 });
    try {
      expect(other.get(DurableRetention).scheduled).toBe(true);
      const { run } = await runs.start('job', {});
      await driveUntil(app, db, run.id);
      await age([run.id], 2);
      for (let i = 0; i < 50 && (await count('ai_checkpoints', run.id)) > 0; i++) {
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(await count('ai_checkpoints', run.id)).toBe(0);
    } finally {
      await other.close();
    }
    expect(other.get(DurableRetention).scheduled).toBe(false);
  });
});
