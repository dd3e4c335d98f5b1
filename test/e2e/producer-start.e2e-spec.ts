import { INestApplication } from '@nestjs/common';
import { DurableWorkflow, RunRepository } from '../../src';
import { bootApp } from '../helpers/app';
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
