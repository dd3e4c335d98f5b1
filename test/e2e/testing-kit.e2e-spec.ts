import path from 'node:path';
import { INestApplication, Type } from '@nestjs/common';
import { RunRepository } from '../../src';
import { driveRun, releaseCrashedRuns, runWorkerUntilCrash } from '../../src/testing';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { FakeTarget, startFakeTarget } from '../helpers/fake-target';
import { prepareWorkerSchema } from '../helpers/schema';

/**
 * The seed's three crash tests, written the way a user of the testing kit writes them for their own
 * agent: kill the worker right after the model returns, right after the tool call succeeds, right
 * after the checkpoint commits; resume; assert that nothing ran twice.
 */
describe('testing kit: the three crash tests in a few lines', () => {
  let db: TestDatabase;
  let target: FakeTarget;
  let app: INestApplication;
  let runs: RunRepository;
  const entry = path.join(__dirname, '..', 'fixtures', 'worker-app.ts');
  const execArgv = ['-r', 'ts-node/register/transpile-only'];

  beforeAll(async () => {
    db = await createTestDatabase('kit');
    await prepareWorkerSchema(db.url);
    target = await startFakeTarget({ honoursKeys: false });
    process.env.DB_URL = db.url; // the fixture's providers read these
    process.env.TARGET_URL = target.url;
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const fx = require('../fixtures/worker-app');
    const providers: Type<unknown>[] = [
      fx.PoSteps,
      fx.PurchaseOrder9,
      fx.Payments,
      fx.ChargeWorkflow,
      fx.SleepyWorkflow,
    ];
    app = await bootApp(db.url, providers);
    runs = app.get(RunRepository);
  });
  afterAll(async () => {
    await app?.close();
    await target?.close();
    await db?.drop();
  });

  const executions = async (runId: string) =>
    (await db.query(`select step from step_effects where run_id = $1 order by id`, [runId])).map(
      (r) => r.step,
    );

  it('killed right after the model returned: the model step is the only thing redone', async () => {
    const { run } = await runs.start('po9', {});
    const crashed = await runWorkerUntilCrash({
      entry,
      execArgv,
      crashAt: 'after-model-output',
      env: { DB_URL: db.url },
    });
    await releaseCrashedRuns(app, crashed);
    expect((await driveRun(app, run.id)).status).toBe('succeeded');
    const steps = await executions(run.id);
    expect(steps.filter((s) => s === 'parse_request')).toHaveLength(2); // its output never committed
    expect(steps.filter((s) => s !== 'parse_request')).toHaveLength(8); // everything else once
  });

  it('killed right after the tool call succeeded: the charge is not repeated', async () => {
    const { run } = await runs.start('charge', { amount: 12 });
    const env = { DB_URL: db.url, TARGET_URL: target.url };
    const crashed = await runWorkerUntilCrash({ entry, execArgv, crashAt: 'after-command-dispatch', env });
    await releaseCrashedRuns(app, crashed);
    expect((await driveRun(app, run.id)).status).toBe('succeeded');
    expect(target.effects()[`run_${run.id}:step_2:charge_card`]).toBe(1);
  });

  it('a worker with a custom worker.workerId: its runs are released when the id is passed', async () => {
    const { run } = await runs.start('charge', { amount: 7 });
    const workerId = `kit-custom-worker-${process.pid}`;
    const env = { DB_URL: db.url, TARGET_URL: target.url, WORKER_ID: workerId };
    const crashed = await runWorkerUntilCrash({ entry, execArgv, crashAt: 'after-command-dispatch', env });
    expect(await releaseCrashedRuns(app, crashed)).toBe(0); // the pid is not in a custom id
    expect(await releaseCrashedRuns(app, crashed, { workerId })).toBe(1);
    expect((await driveRun(app, run.id)).status).toBe('succeeded');
    expect(target.effects()[`run_${run.id}:step_2:charge_card`]).toBe(1);
  });

  it('killed right after a checkpoint committed: that step never runs again', async () => {
    const { run } = await runs.start('po9', {});
    const crashed = await runWorkerUntilCrash({
      entry,
      execArgv,
      crashAt: 'after-step-commit@4',
      env: { DB_URL: db.url },
    });
    await releaseCrashedRuns(app, crashed);
    expect((await driveRun(app, run.id)).status).toBe('succeeded');
    const steps = await executions(run.id);
    expect(new Set(steps).size).toBe(9);
    expect(steps).toHaveLength(9); // every step exactly once
  });
});
