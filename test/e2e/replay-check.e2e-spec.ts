import { INestApplication, Injectable } from '@nestjs/common';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DurableStep, DurableWorkflow, RunContext, RunRepository } from '../../src';
import { cli } from '../../src/cli/main';
import { exportRunHistory, replayRuns, RunHistory } from '../../src/testing';
import { replayAppVersion } from '../fixtures/replay-app';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil } from '../helpers/drive';

/**
 * The replay check itself (issue 19, "a replay check on every run of every test"): it must fail a run
 * whose code no longer replays its record, in each way a replay can differ (another call, a call
 * left unasked, a call past the end of a finished run's record, another output), pass one that
 * replays, stop a parked run at the end of its record, and work from exported history files and from
 * the CLI against a changed app. This file turns the suite-wide switch off: its runs diverge on purpose.
 */

const flags = { wallClock: false, skipFirst: false, extraStep: false, fewer: false };

@Injectable()
class Steps {
  @DurableStep({ name: 'first' })
  async first(n: number) {
    return { n, doubled: n * 2 };
  }
  @DurableStep({ name: 'second' })
  async second(n: number) {
    return n + 1;
  }
  @DurableStep({ name: 'extra' })
  async extra() {
    return 'extra';
  }
}

@DurableWorkflow('checked')
class CheckedWorkflow {
  constructor(private readonly steps: Steps) {}
  async run(input: { n: number; wait?: boolean }, ctx: RunContext) {
    const a = flags.skipFirst ? { n: input.n, doubled: 0 } : await this.steps.first(input.n);
    const id = ctx.uuid();
    if (input.wait) await ctx.waitForSignal('go');
    const rounds = flags.fewer ? 1 : 2;
    let b = 0;
    for (let i = 0; i < rounds; i++) b = await this.steps.second(a.doubled + i);
    if (flags.extraStep) await this.steps.extra();
    return { a, b, id, at: flags.wallClock ? Date.now() : 0 };
  }
}

let db: TestDatabase;
let app: INestApplication;
let runs: RunRepository;
const saved = process.env.DURABLE_REPLAY_CHECK;

beforeAll(async () => {
  delete process.env.DURABLE_REPLAY_CHECK; // runs here diverge on purpose
  db = await createTestDatabase('replaycheck');
  app = await bootApp(db.url, [Steps, CheckedWorkflow], { worker: { workerId: 'rc' } });
  runs = app.get(RunRepository);
});
afterAll(async () => {
  process.env.DURABLE_REPLAY_CHECK = saved;
  await app?.close();
  await db?.drop();
});
afterEach(() => {
  for (const k of Object.keys(flags) as (keyof typeof flags)[]) flags[k] = false;
  replayAppVersion.v = 1;
});

async function finished(input: { n: number }): Promise<string> {
  const { run } = await runs.start('checked', input);
  expect((await driveUntil(app, db, run.id)).status).toBe('succeeded');
  return run.id;
}

const check = async (id: string) => (await replayRuns(app, { runIds: [id] }))[0];

describe('the replay check', () => {
  it('passes a run that replays its record exactly', async () => {
    const id = await finished({ n: 3 });
    expect(await check(id)).toMatchObject({
      runId: id,
      status: 'succeeded',
      ended: 'returned',
      problems: [],
    });
  });

  it('fails a run whose code now calls another step where the record has one', async () => {
    const id = await finished({ n: 4 });
    flags.skipFirst = true;
    const r = await check(id);
    expect(r.problems.join()).toMatch(/recorded step #0 as "first" but the workflow now calls "\$uuid"/);
  });

  it('fails a run whose code leaves a recorded call unasked', async () => {
    const id = await finished({ n: 5 });
    flags.fewer = true;
    const r = await check(id);
    expect(r.problems.join()).toMatch(/second/);
    expect(r.problems.join()).toMatch(/never asked for/);
  });

  it("fails a finished run whose code asks for a call past its record's end", async () => {
    const id = await finished({ n: 6 });
    flags.extraStep = true;
    const r = await check(id);
    expect(r.ended).toBe('end-of-record');
    expect(r.problems.join()).toMatch(/asked for extra at #4, past the end of the record/);
  });

  it('fails a run whose output differs byte for byte (a wall clock in run())', async () => {
    flags.wallClock = true;
    const id = await finished({ n: 7 });
    const r = await check(id);
    expect(r.problems.join()).toMatch(/the replay returned .*"at":\d+.*, the run recorded/);
  });

  it('replays a parked run up to the end of its record', async () => {
    const { run } = await runs.start('checked', { n: 8, wait: true });
    await driveUntil(app, db, run.id, ['waiting']);
    expect(await check(run.id)).toMatchObject({ status: 'waiting', ended: 'end-of-record', problems: [] });
    flags.skipFirst = true;
    expect((await check(run.id)).problems).toHaveLength(1);
  });

  it('replays exported history documents, and fails one whose record was changed', async () => {
    const id = await finished({ n: 9 });
    const history: RunHistory = JSON.parse(JSON.stringify(await exportRunHistory(app, id)));
    expect((await replayRuns(app, { histories: [history] }))[0].problems).toEqual([]);
    const first = history.checkpoints.find((c) => c.name === 'first')!;
    first.output = { doubled: 20, n: 10 };
    const [r] = await replayRuns(app, { histories: [history] });
    expect(r.problems.join()).toMatch(
      /recorded step #2 "second", but on replay it was called with other arguments/,
    );
  });

  it('the CLI exports runs and replays them against a changed app module (version 2 inserts a step)', async () => {
    process.env.REPLAY_APP_DB_URL = db.url;
    const { bootModules } = await import('../helpers/app');
    const { ReplayAppModule } = await import('../fixtures/replay-app');
    const recorder = await bootModules({ imports: [ReplayAppModule] });
    const started = await recorder.get(RunRepository).start('replay-order', { ref: 'PO-1' });
    await expect(started.result({ timeoutMs: 20_000 })).resolves.toMatchObject({ total: 300 });
    await recorder.close();

    const dir = mkdtempSync(path.join(tmpdir(), 'replay-cli-'));
    const file = path.join(dir, 'po-1.json');
    const out: string[] = [];
    const err: string[] = [];
    const env = { DATABASE_URL: db.url };
    expect(
      await cli(
        ['export', '--run', started.run.id, '--out', file],
        env,
        (l) => out.push(l),
        (l) => err.push(l),
      ),
    ).toBe(0);
    expect(JSON.parse(readFileSync(file, 'utf8'))).toMatchObject({
      run: { id: started.run.id, status: 'succeeded' },
    });

    const appSpec = `${path.resolve(__dirname, '../fixtures/replay-app.ts')}#ReplayAppModule`;
    const replay = (args: string[]) => {
      out.length = 0;
      return cli(
        ['replay', '--app', appSpec, ...args],
        env,
        (l) => out.push(l),
        (l) => err.push(l),
      );
    };
    try {
      expect(await replay(['--kind', 'replay-order'])).toBe(0);
      expect(out.join('\n')).toMatch(/^ok {2}.* replay-order {2}succeeded {2}returned$/m);
      // A run held for non-determinism (its row as a hold leaves it) is replayed too, and marked.
      const doc = JSON.parse(readFileSync(file, 'utf8')) as RunHistory;
      const heldFile = path.join(dir, 'held.json');
      const error = { code: 'DURABLE_NON_DETERMINISM', message: 'held' };
      writeFileSync(heldFile, JSON.stringify({ ...doc, run: { ...doc.run, status: 'waiting', error } }));
      expect(await replay(['--history', heldFile])).toBe(0);
      expect(out.join('\n')).toMatch(/^ok {2}.* replay-order {2}waiting {2}returned {2}held: replays now$/m);
      expect(out.join('\n')).toMatch(/1\/1 run\(s\) replayed as recorded; 1 held run\(s\) replay now/);
      replayAppVersion.v = 2; // the deploy that inserts a step before `price`
      expect(await replay(['--history', file])).toBe(1);
      expect(out.join('\n')).toMatch(
        /^FAIL .*recorded step #1 as "price" but the workflow now calls "fraud_check"/m,
      );
      expect(await replay(['--history', heldFile])).toBe(1);
      expect(out.join('\n')).toMatch(/^FAIL .* {2}waiting {2}\S+ {2}held: still diverges: .*"price"/m);
      // The replay booted the app with its worker on, yet claimed nothing: no new epoch.
      const [{ epoch }] = await db.query(`select epoch from ai_runs where id = $1`, [started.run.id]);
      expect(Number(epoch)).toBe(1);
    } finally {
      delete process.env.DURABLE_EXECUTION_REPLAY_ONLY;
    }
    expect(err).toEqual([]);
  });
});
