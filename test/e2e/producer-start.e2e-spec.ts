import { INestApplication, LoggerService } from '@nestjs/common';
import { DurableWorkflow, MissingConcurrencyKeyError, RunRepository } from '../../src';
import { DurableWorker } from '../../src/engine/worker.service';
import { bootApp, bootModules, durableModule } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';

/**
 * Issue 36, part 2: `runs.start(WorkflowClass, input)` in a producer process (worker off, the class not
 * registered there) starts the run with everything the class declares, exactly as a worker process
 * would: its concurrency key function, `maxAttempts`, version and debounce. Before, only the registry
 * was read: the run got `concurrencyKey: null` (a per-tenant limit silently skipped) and the default
 * `maxAttempts`, and a debounced kind was not debounced.
 */
@DurableWorkflow('ps-agent', {
  maxAttempts: 10,
  concurrencyKey: (i: { tenant: string }) => i.tenant,
  perKeyConcurrency: 1,
  version: 3,
})
class AgentWorkflow {
  async run(input: { tenant: string }) {
    return input.tenant;
  }
}

@DurableWorkflow('ps-digest', { debounce: { periodMs: 60_000, key: (i: { user: string }) => i.user } })
class DigestWorkflow {
  async run(input: { user: string }) {
    return input.user;
  }
}

describe('a producer process starts what the class declares (issue 36, part 2)', () => {
  let db: TestDatabase;
  let api: INestApplication;
  let runs: RunRepository;

  beforeAll(async () => {
    db = await createTestDatabase('producer_start');
    // An API process: no worker, and no workflow class among its providers.
    api = await bootApp(db.url, [], { worker: { enabled: false }, unservedKinds: 'warn' });
    runs = api.get(RunRepository);
  });
  afterAll(async () => {
    await api?.close();
    await db?.drop();
  });

  it("a class's key function, attempts and version", async () => {
    const { run } = await runs.start(AgentWorkflow, { tenant: 'acme' });
    expect({ key: run.concurrencyKey, attempts: run.maxAttempts }).toEqual({ key: 'acme', attempts: 10 });
    const [row] = await db.query(`select kind_version from ai_runs where id = $1`, [run.id]);
    expect(row.kind_version).toBe(3);
    // The call's own values still win.
    const own = (await runs.start(AgentWorkflow, { tenant: 'acme' }, { maxAttempts: 2, concurrencyKey: 'x' }))
      .run;
    expect({ key: own.concurrencyKey, attempts: own.maxAttempts }).toEqual({ key: 'x', attempts: 2 });
  });

  it("a class's debounce: two starts for one key within the period are one run", async () => {
    const a = (await runs.start(DigestWorkflow, { user: 'u1' })).run;
    const b = (await runs.start(DigestWorkflow, { user: 'u1' })).run;
    expect(b.id).toBe(a.id);
    const n = await db.query(`select count(*)::int as n from ai_runs where kind = 'ps-digest'`);
    expect(n[0].n).toBe(1);
  });
});

/** A logger that keeps the warnings (errors too; the rest is dropped). */
function keepWarnings(): LoggerService & { warnings: string[] } {
  const warnings: string[] = [];
  const drop = () => undefined;
  return {
    warnings,
    log: drop,
    debug: drop,
    verbose: drop,
    error: drop,
    warn: (m: unknown) => warnings.push(String(m)),
  };
}

describe('a keyed kind started by name, with no key, where nothing registers it (issue 36, part 2)', () => {
  let db: TestDatabase;
  let worker: INestApplication;
  const apps: INestApplication[] = [];
  const producer = async (unkeyedStarts: 'warn' | 'refuse') => {
    const logger = keepWarnings();
    const app = await bootModules(
      {
        imports: [
          durableModule(db.url, { worker: { enabled: false }, unservedKinds: 'warn', unkeyedStarts }),
        ],
      },
      logger,
    );
    apps.push(app);
    return { runs: app.get(RunRepository), logger };
  };
  const count = async () =>
    (await db.query(`select count(*)::int as n from ai_runs where kind = 'ps-agent'`))[0].n as number;

  beforeAll(async () => {
    db = await createTestDatabase('producer_keyless');
    // A worker process that runs the kind declares its per-key limit (at its first claim round).
    worker = await bootApp(db.url, [AgentWorkflow]);
    await worker.get(DurableWorker).tick();
  });
  afterAll(async () => {
    for (const a of apps) await a.close();
    await worker?.close();
    await db?.drop();
  });

  it("'warn' (the default): one warning per kind, and the run starts", async () => {
    const { runs, logger } = await producer('warn');
    const before = await count();
    await runs.start('ps-agent', { tenant: 'acme' });
    await runs.start('ps-agent', { tenant: 'globex' });
    expect(await count()).toBe(before + 2);
    const about = logger.warnings.filter((w) => w.includes("'ps-agent'") && w.includes('concurrencyKey'));
    expect(about).toHaveLength(1);
    expect(about[0]).toContain('escape');
    // Given a key, or the class, there is nothing to warn about.
    const { runs: other, logger: quiet } = await producer('warn');
    await other.start('ps-agent', { tenant: 'acme' }, { concurrencyKey: 'acme' });
    await other.start(AgentWorkflow, { tenant: 'acme' });
    expect(quiet.warnings.filter((w) => w.includes('concurrencyKey'))).toEqual([]);
  });

  it("'refuse': a typed error naming the kind, and nothing written", async () => {
    const { runs } = await producer('refuse');
    const before = await count();
    const err = await runs.start('ps-agent', { tenant: 'acme' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MissingConcurrencyKeyError);
    expect(err).toMatchObject({ code: 'DURABLE_MISSING_CONCURRENCY_KEY', kind: 'ps-agent' });
    expect(await count()).toBe(before);
    // A key, or the class, starts it.
    await runs.start('ps-agent', { tenant: 'acme' }, { concurrencyKey: 'acme' });
    await runs.start(AgentWorkflow, { tenant: 'acme' });
    expect(await count()).toBe(before + 2);
  });

  it('a kind with no per-key limit starts by name with no warning', async () => {
    const { runs, logger } = await producer('refuse');
    await runs.start('ps-digest-unlimited', { user: 'u1' });
    expect(logger.warnings.filter((w) => w.includes('concurrencyKey'))).toEqual([]);
  });
});
