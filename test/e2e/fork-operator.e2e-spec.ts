/**
 * Time travel from the operator's side (issue 49): `POST api/runs/:id/fork` of the admin API and the
 * CLI's `fork RUN --from STEP`, each through RunRepository.fork with its checks (a 400 naming the field,
 * a 409 for a refused cut, exit 2 for a bad flag, exit 1 for a refused fork), recorded with who asked.
 */
import { INestApplication } from '@nestjs/common';
import { RunRepository } from '../../src';
import { ApiKeyAdminGuard, DurableAdminModule } from '../../src/admin';
import { cli } from '../../src/cli/main';
import { AgentV1, forkEnv, FORK_PROVIDERS } from '../fixtures/fork-agent-app';
import { bootHttpApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil } from '../helpers/drive';
import { FakeTarget, startFakeTarget } from '../helpers/fake-target';
import { ModelServer, startModelServer } from '../helpers/model-server';

const OPS_KEY = 'ops-key-0123456789abcdef';
const VIEW_KEY = 'view-key-0123456789abcdef';

describe('fork for operators', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let api: string;
  let runs: RunRepository;
  let model: ModelServer;
  let vendor: FakeTarget;

  beforeAll(async () => {
    db = await createTestDatabase('forkops');
    model = await startModelServer();
    vendor = await startFakeTarget();
    forkEnv.modelUrl = model.url;
    forkEnv.vendorUrl = vendor.url;
    const guard = new ApiKeyAdminGuard({
      keys: { [OPS_KEY]: 'alice', [VIEW_KEY]: { operator: 'bob', readOnly: true } },
    });
    const booted = await bootHttpApp(db.url, {
      imports: [DurableAdminModule.forRoot({ path: '/ops/durable/', guard })],
      providers: FORK_PROVIDERS,
    });
    app = booted.app;
    api = `${booted.http}/ops/durable/api`;
    runs = app.get(RunRepository);
  });
  afterAll(async () => {
    await app?.close();
    await model?.close();
    await vendor?.close();
    await db?.drop();
  });

  const call = async (path: string, body: unknown, key = OPS_KEY) => {
    const res = await fetch(`${api}${path}`, {
      method: 'POST',
      headers: { 'x-api-key': key, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as any };
  };

  async function failedAtSeven(): Promise<string> {
    const { run } = await runs.start(AgentV1, { task: 'refund order 21' });
    expect((await driveUntil(app, db, run.id)).status).toBe('failed');
    return run.id;
  }

  it('POST api/runs/:id/fork forks with who asked, refuses what RunRepository.fork refuses', async () => {
    const id = await failedAtSeven();
    expect((await call(`/runs/${id}/fork`, { fromStep: 7, version: 2 }, VIEW_KEY)).status).toBe(403);
    const bad = await call(`/runs/${id}/fork`, { fromStep: -1, original: 'later' });
    expect(bad.status).toBe(400);
    expect((bad.body.errors as Array<{ field: string }>).map((e) => e.field).sort()).toEqual([
      'fromStep',
      'original',
    ]);
    const notLast = await call(`/runs/${id}/fork`, { fromStep: 7, editResult: { step: 3, value: 'x' } });
    expect(notLast).toMatchObject({ status: 400, body: { code: 'DURABLE_INVALID_ARGUMENT' } });
    expect(notLast.body.message).toContain('editResult.step must be 6');

    const res = await call(`/runs/${id}/fork`, { fromStep: 7, version: 2, idempotencyKey: `ops-${id}` });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ by: 'alice', created: true, inherited: 7 });
    expect(res.body.run.forkedFrom).toEqual({ runId: id, fromStep: 7 });
    const again = await call(`/runs/${id}/fork`, { fromStep: 7, version: 2, idempotencyKey: `ops-${id}` });
    expect(again.body).toMatchObject({ created: false, run: { id: res.body.run.id } });
    const forked = (await runs.events(id)).filter((e) => e.type === 'run.forked').map((e) => e.payload);
    expect(forked).toEqual([{ fork: res.body.run.id, fromStep: 7, original: 'leave', by: 'alice' }]);
    expect((await driveUntil(app, db, res.body.run.id)).status).toBe('succeeded');
  });

  it('answers 409 with the refusal for a cut that would inherit a command in doubt', async () => {
    const { run } = await runs.start('fork-doubt', { task: 'x' });
    await driveUntil(app, db, run.id, ['waiting']);
    const res = await call(`/runs/${run.id}/fork`, { fromStep: 2, original: 'leave' });
    expect(res).toMatchObject({ status: 409, body: { code: 'DURABLE_FORK_REFUSED' } });
    expect(res.body.message).toContain(`run_${run.id}:step_1:settle`);
  });

  /** The CLI in this process against the test database: its exit code and what it printed. */
  async function op(...args: string[]) {
    const stdout: string[] = [];
    const stderr: string[] = [];
    const status = await cli(
      args,
      { DATABASE_URL: db.url },
      (l) => stdout.push(l),
      (l) => stderr.push(l),
    );
    return { status, stdout: stdout.join('\n'), stderr: stderr.join('\n') };
  }

  it('the CLI forks (fork RUN --from STEP), prints the link, and refuses bad flags before connecting', async () => {
    const id = await failedAtSeven();
    expect((await op('fork', id)).status).toBe(2);
    expect((await op('fork', id, '--from', '7', '--original', 'maybe')).status).toBe(2);
    expect((await op('fork', id, '--from', '7', '--edit-step', '6')).stderr).toContain('go together');
    const refused = await op('fork', id, '--from', '7', '--original', 'cancel', '--show-data');
    expect(refused.status).toBe(1);
    expect(refused.stderr).toContain("'cancel' does not apply");

    const human = await op('fork', id, '--from', '7', '--version', '2', '--by', 'dana', '--show-data');
    expect(human).toMatchObject({ status: 0, stderr: '' });
    const forkId = /run ([0-9a-f-]{36}) inherits 7 checkpoint/.exec(human.stdout)![1];
    expect(human.stdout).toContain(`forked from ${id} at step 7`);
    const json = await op('fork', forkId, '--from', '3', '--original', 'leave', '--json', '--show-data');
    expect(json.status).toBe(0);
    const body = JSON.parse(json.stdout);
    expect(body).toMatchObject({
      created: true,
      inherited: 3,
      run: { forkedFrom: { runId: forkId, fromStep: 3 } },
    });
    expect((await runs.events(id)).find((e) => e.type === 'run.forked')!.payload).toMatchObject({
      by: 'dana',
    });
    const shown = await op('show', forkId, '--show-data');
    expect(shown.stdout).toContain(`forked from ${id} at step 7`);
    // --in-place: the failed run itself goes back to step 7 under its next generation.
    const rewound = await op('fork', id, '--from', '7', '--in-place', '--version', '2', '--show-data');
    expect(rewound).toMatchObject({ status: 0, stderr: '' });
    expect(rewound.stdout).toContain(`rewound ${id} to step 7 (generation 1)`);
    expect((await driveUntil(app, db, id)).status).toBe('succeeded');
  });
});
