/**
 * Time travel under a crash (issue 49): the worker process that claims a fork for the first time is
 * SIGKILLed in the middle of that claim, after the fork's first new command reached the vendor and before
 * its outcome was recorded. Another worker process takes the fork over: it settles that command by asking
 * the vendor (lookup by the fork's key), sends nothing twice, asks the model for no turn it inherited or
 * committed, and the fork succeeds.
 */
import { ChildProcess, fork } from 'node:child_process';
import path from 'node:path';
import { INestApplication } from '@nestjs/common';
import { RunRepository } from '../../src';
import { runDurableMigrations } from '../../src/migrations';
import { AgentV1, forkEnv, FORK_PROVIDERS } from '../fixtures/fork-agent-app';
import { bootApp } from '../helpers/app';
import { compiledEntry } from '../helpers/compiled';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil } from '../helpers/drive';
import { FakeTarget, startFakeTarget } from '../helpers/fake-target';
import { waitFor } from '../helpers/processes';
import { ModelServer, startModelServer } from '../helpers/model-server';

const FIXTURE = path.join(__dirname, '..', 'fixtures', 'fork-agent-app.ts');

interface Worker {
  child: ChildProcess;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function spawnWorker(env: Record<string, string>): Worker {
  const child = fork(compiledEntry(FIXTURE), [], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return { child, exited };
}

describe('a fork whose first claim is killed', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let model: ModelServer;
  let vendor: FakeTarget;
  const workers: Worker[] = [];

  beforeAll(async () => {
    db = await createTestDatabase('forkcrash');
    await runDurableMigrations({ type: 'postgres', url: db.url });
    model = await startModelServer();
    vendor = await startFakeTarget({ honoursKeys: false }); // a repeated key would be a second charge
    forkEnv.modelUrl = model.url;
    forkEnv.vendorUrl = vendor.url;
    app = await bootApp(db.url, FORK_PROVIDERS);
  });
  afterAll(async () => {
    for (const w of workers.splice(0)) {
      w.child.kill('SIGKILL');
      await w.exited;
    }
    await app?.close();
    await model?.close();
    await vendor?.close();
    await db?.drop();
  });

  it('SIGKILL after the fork sent its first command: settled by lookup, nothing sent or asked twice', async () => {
    const runs = app.get(RunRepository);
    const { run } = await runs.start(AgentV1, { task: 'refund order 11' });
    expect((await driveUntil(app, db, run.id)).status).toBe('failed');
    const { run: forked } = await runs.fork(run.id, { fromStep: 7, version: 2 });
    const env = { DB_URL: db.url, MODEL_URL: model.url, VENDOR_URL: vendor.url };

    const victim = spawnWorker({ ...env, DURABLE_CRASH_AT: 'after-command-dispatch@8' });
    workers.push(victim);
    expect((await victim.exited).signal).toBe('SIGKILL');
    const key = `run_${forked.id}:step_8:act`;
    expect(vendor.effects()[key]).toBe(1);
    const [row] = await db.query(`select status from ai_commands where idempotency_key = $1`, [key]);
    expect(row.status).toBe('pending'); // its outcome never recorded: in doubt for the next claim

    const heir = spawnWorker(env);
    workers.push(heir);
    await waitFor(
      async () => (await runs.get(forked.id))!.status === 'succeeded',
      45_000,
      'the fork to succeed on the second worker',
    );
    // Nothing sent twice: the original's three charges and the fork's one, each once.
    const effects = vendor.effects();
    expect(Object.values(effects).every((n) => n === 1)).toBe(true);
    expect(Object.keys(effects).sort()).toEqual(
      [...[2, 4, 6].map((s) => `run_${run.id}:step_${s}:act`), key].sort(),
    );
    const [settled] = await db.query(
      `select status, resolution from ai_commands where idempotency_key = $1`,
      [key],
    );
    expect(settled).toEqual({ status: 'succeeded', resolution: 'lookup' });
    // No turn asked twice: the original 1, 3, 5, 7 (its broken 7); the fork 7 and 9, once each.
    expect(model.asked.filter((a) => a.run === run.id).map((a) => a.step)).toEqual([1, 3, 5, 7]);
    expect(model.asked.filter((a) => a.run === forked.id).map((a) => a.step)).toEqual([7, 9]);
  }, 90_000);
});
