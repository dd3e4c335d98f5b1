import { INestApplication, LoggerService } from '@nestjs/common';
import {
  DURABLE_HTTP_STATUS,
  DurableWorkflow,
  NoWorkerForKindError,
  RunContext,
  RunRepository,
  type DurableExecutionModuleOptions,
} from '../../src';
import { RunStatsReader } from '../../src/store/run-stats.reader';
import { bootModules, durableModule } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { spawnWorker, waitFor } from '../helpers/processes';

/**
 * Issue 20, item 5: a run of a kind no live worker serves. Workers write a presence row of their own
 * (`ai_workers`: the kinds they serve; an idle worker sends no lease heartbeat), renewed on
 * `worker.presenceIntervalMs` and removed when they drain. A producer-only `start()` of a kind none
 * serves warns once per kind, or refuses with `unservedKinds: 'refuse'` (nothing written); the operator's
 * numbers (stats, metrics) count due runs with no worker for their kind.
 */

@DurableWorkflow('served-kind')
class ServedWorkflow {
  async run(_input: unknown, ctx: RunContext) {
    await ctx.sleep(60_000);
    return 'done';
  }
}

const PERIOD_MS = 200;

describe('worker presence: kinds no live worker serves', () => {
  let db: TestDatabase;
  const apps: INestApplication[] = [];
  const warnings: string[] = [];
  const logger: LoggerService = {
    log: () => undefined,
    error: () => undefined,
    warn: (m: unknown) => void warnings.push(String(m)),
  };
  const boot = async (options: Partial<DurableExecutionModuleOptions>, providers: never[] = []) => {
    const app = await bootModules({ imports: [durableModule(db.url, options)], providers }, logger as never);
    apps.push(app);
    return app;
  };
  const presence = () =>
    db.query<{ worker_id: string; kinds: string[]; live: boolean; seen_at: Date }>(
      `select worker_id, kinds, expires_at > now() as live, seen_at from ai_workers order by worker_id`,
    );
  const runsOf = async (kind: string) =>
    (await db.query(`select count(*)::int as n from ai_runs where kind = $1`, [kind]))[0].n as number;

  beforeAll(async () => {
    db = await createTestDatabase('presence');
  });
  afterAll(async () => {
    for (const a of apps) await a.close().catch(() => undefined);
    await db?.drop();
  });

  it('a worker writes its row at boot, renews it on its period, and removes it when it shuts down', async () => {
    const worker = await boot(
      { worker: { enabled: true, workerId: 'w-served', presenceIntervalMs: PERIOD_MS, pollIntervalMs: 50 } },
      [ServedWorkflow as never],
    );
    const [row] = await presence();
    expect(row).toMatchObject({ worker_id: 'w-served', kinds: ['served-kind'], live: true });
    await waitFor(
      async () => (await presence())[0].seen_at.getTime() > row.seen_at.getTime(),
      5000,
      'a renewal',
    );
    await worker.close();
    expect(await presence()).toEqual([]);
  });

  it('a producer-only start of a kind nobody serves warns once per kind; a served kind does not warn', async () => {
    await boot({ worker: { enabled: true, workerId: 'w-served-2', presenceIntervalMs: PERIOD_MS } }, [
      ServedWorkflow as never,
    ]);
    const producer = await boot({ worker: { enabled: false } });
    const runs = producer.get(RunRepository);
    warnings.length = 0;
    await runs.start('served-kind', {});
    await runs.start('nobody-kind', {});
    await runs.start('nobody-kind', {});
    const about = (kind: string) => warnings.filter((w) => w.includes(`kind '${kind}'`));
    expect(about('served-kind')).toEqual([]);
    expect(about('nobody-kind')).toHaveLength(1);
    expect(about('nobody-kind')[0]).toContain('no live worker serves');
    expect(about('nobody-kind')[0]).toContain("unservedKinds: 'refuse'");
    expect(await runsOf('nobody-kind')).toBe(2); // 'warn' starts them: they wait for a worker
    // The operator's numbers: due runs by kind with no live worker (the served kind is not there).
    const stats = await producer.get(RunStatsReader).read();
    expect(stats.dueWithoutWorker).toEqual({ 'nobody-kind': 2 });
  });

  it("unservedKinds: 'refuse' throws NoWorkerForKindError (503) and writes nothing; a served kind starts", async () => {
    const producer = await boot({ worker: { enabled: false }, unservedKinds: 'refuse' });
    const runs = producer.get(RunRepository);
    const before = await runsOf('ghost-kind');
    const err = await runs.start('ghost-kind', { n: 1 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NoWorkerForKindError);
    expect(err).toMatchObject({ code: 'DURABLE_NO_WORKER_FOR_KIND', kind: 'ghost-kind' });
    expect((err as Error).message).toContain('Start a worker that registers @DurableWorkflow("ghost-kind")');
    expect(DURABLE_HTTP_STATUS.DURABLE_NO_WORKER_FOR_KIND).toBe(503);
    expect(await runsOf('ghost-kind')).toBe(before);
    await expect(runs.start('served-kind', {})).resolves.toMatchObject({ created: true });
  });

  it('a worker process killed (SIGKILL) stops counting once its row expires; one stopped (SIGTERM) leaves at once', async () => {
    for (const a of apps.splice(0)) await a.close();
    const env = { DB_URL: db.url, PRESENCE_MS: String(PERIOD_MS) };
    const killed = spawnWorker({ ...env, WORKER_ID: 'w-killed' });
    const stopped = spawnWorker({ ...env, WORKER_ID: 'w-stopped' });
    await Promise.all([killed.ready, stopped.ready]);
    const live = async () => (await presence()).filter((r) => r.live).map((r) => r.worker_id);
    expect(await live()).toEqual(['w-killed', 'w-stopped']);
    expect((await presence())[0].kinds).toContain('sleepy');
    const producer = await boot({ worker: { enabled: false }, unservedKinds: 'refuse' });
    await expect(producer.get(RunRepository).start('sleepy', { ms: 1 })).resolves.toMatchObject({
      created: true,
    });

    stopped.child.kill('SIGTERM');
    await stopped.exited;
    expect((await presence()).map((r) => r.worker_id)).toEqual(['w-killed']); // removed by its drain
    killed.child.kill('SIGKILL');
    await killed.exited;
    // Its row stays (nobody said goodbye) and stops counting after three periods.
    await waitFor(async () => (await live()).length === 0, 5000, 'the killed worker row to expire');
    expect((await presence()).map((r) => r.worker_id)).toEqual(['w-killed']);
    const refusing = await boot({ worker: { enabled: false }, unservedKinds: 'refuse' });
    await expect(refusing.get(RunRepository).start('sleepy', { ms: 1 })).rejects.toBeInstanceOf(
      NoWorkerForKindError,
    );
    // A producer-only process that registers the workflow class serves it no more than one that does not.
    const registering = await boot({ worker: { enabled: false }, unservedKinds: 'refuse' }, [
      ServedWorkflow as never,
    ]);
    await expect(registering.get(RunRepository).start(ServedWorkflow, {})).rejects.toBeInstanceOf(
      NoWorkerForKindError,
    );
    // Started anyway ('warn'), it is due with no worker for its kind.
    const warning = await boot({ worker: { enabled: false } });
    await warning.get(RunRepository).start('sleepy', { ms: 1 });
    const stats = await refusing.get(RunStatsReader).read();
    expect(stats.dueWithoutWorker['nobody-kind']).toBe(2);
    // This one, and the one started while the workers were live if the killed worker held it unfinished.
    expect(stats.dueWithoutWorker.sleepy).toBeGreaterThanOrEqual(1);
  });
});
