import { INestApplication } from '@nestjs/common';
import { DurableSchedules, DurableWorkflow, PatchStatus, RunContext, RunRepository } from '../../src';
import { ApiKeyAdminGuard, DurableAdminModule } from '../../src/admin';
import { driveRun } from '../../src/testing';
import { cli } from '../../src/cli/main';
import { nextTick } from '../../src/util/cron-ticks';
import { bootHttpApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';

/**
 * Issue 36, section 3: `trigger SCHEDULE` fires a schedule now from the CLI (the run its next tick
 * would start; the schedule then waits for the tick after), and `patch-status KIND PATCH` and `GET
 * <admin>/api/patch-status` answer `RunRepository.patchStatus`, behind the admin guard.
 */

const KEY = 'patch-key-0123456789abcdef';

@DurableWorkflow('trig-report')
class Report {
  async run(input: { scheduledAt: string }) {
    return input.scheduledAt;
  }
}

@DurableWorkflow('trig-patched')
class Patched {
  async run(_input: unknown, ctx: RunContext) {
    const fresh = ctx.patched('new-prompt');
    await ctx.waitForSignal('go');
    return fresh;
  }
}

let db: TestDatabase;
let app: INestApplication;
let api: string;
let runs: RunRepository;

beforeAll(async () => {
  db = await createTestDatabase('op_trigger');
  const booted = await bootHttpApp(db.url, {
    imports: [
      DurableAdminModule.forRoot({ path: 'ops', guard: new ApiKeyAdminGuard({ keys: { [KEY]: 'ops' } }) }),
    ],
    providers: [Report, Patched],
  });
  app = booted.app;
  api = `${booted.http}/ops/api`;
  runs = app.get(RunRepository);
});
afterAll(async () => {
  await app?.close();
  await db?.drop();
});

/** Runs the CLI in this process against the test database (or `env`); its exit code and output. */
async function op(args: string[], env: Record<string, string> = { DATABASE_URL: db.url }) {
  const stdout: string[] = [];
  const stderr: string[] = [];
  const status = await cli(
    args,
    env,
    (l) => stdout.push(l),
    (l) => stderr.push(l),
  );
  return { status, stdout: stdout.join('\n'), stderr: stderr.join('\n') };
}

describe('operator CLI: trigger', () => {
  it("starts the run the schedule's next tick would start, prints its id; the schedule waits for the tick after", async () => {
    const made = await app.get(DurableSchedules).create('trig-nightly', 'trig-report', '0 2 * * *', {
      input: { region: 'eu' },
    });
    const res = await op(['trigger', 'trig-nightly']);
    expect(res).toMatchObject({ status: 0, stderr: '' });
    expect(res.stdout).toMatch(/^[0-9a-f-]{36}$/);
    const tick = made.nextAt.toISOString();
    const [row] = await db.query(`select kind, idempotency_key, input from ai_runs where id = $1`, [
      res.stdout,
    ]);
    expect(row).toEqual({
      kind: 'trig-report',
      idempotency_key: `cron:trig-nightly:${tick}`,
      input: { region: 'eu', schedule: 'trig-nightly', scheduledAt: tick },
    });
    const [sched] = (await app.get(DurableSchedules).list()).filter((s) => s.name === 'trig-nightly');
    expect(sched.nextAt).toEqual(nextTick('0 2 * * *', 'UTC', made.nextAt));
    expect((await driveRun(app, res.stdout)).output).toBe(tick);

    const json = await op(['trigger', 'trig-nightly', '--json']);
    expect(json.status).toBe(0);
    const answer = JSON.parse(json.stdout) as { schedule: string; runIds: string[] };
    expect(answer.schedule).toBe('trig-nightly');
    expect(answer.runIds).toHaveLength(1);
    const [second] = await db.query(`select input from ai_runs where id = $1`, [answer.runIds[0]]);
    expect(second.input.scheduledAt).toBe(sched.nextAt.toISOString()); // the tick after, not skipped
  });

  it('an unknown schedule exits 1; a bad name or word count exits 2 with the usage, before connecting', async () => {
    const missing = await op(['trigger', 'no-such']);
    expect(missing.status).toBe(1);
    expect(missing.stderr).toContain('No schedule is named "no-such"');
    const nowhere = { DATABASE_URL: 'postgres://root@127.0.0.1:1/nowhere' };
    for (const args of [
      ['trigger'],
      ['trigger', 'a', 'b'],
      ['trigger', 'bad\nname'],
      ['trigger', 'x'.repeat(201)],
      ['trigger', 'nightly\u202e'],
      ['trigger', 'nightly', '--by', 'me'],
    ]) {
      const res = await op(args, nowhere);
      expect({ args, status: res.status }).toEqual({ args, status: 2 });
      expect(res.stderr).toContain('Usage: nestjs-durable-execution <command>');
    }
    expect((await op(['trigger', 'bad\nname'], nowhere)).stderr).toMatch(
      /SCHEDULE must not contain control characters/,
    );
  });
});

describe('patch status: CLI patch-status and GET api/patch-status', () => {
  let status: PatchStatus;

  beforeAll(async () => {
    const id = (await runs.start(Patched, {})).run.id;
    await driveRun(app, id, ['waiting']); // it recorded the marker: on the new path
    status = await runs.patchStatus('trig-patched', 'new-prompt');
    expect(status).toMatchObject({ openWithPatch: 1, openMayTakeOldPath: 0 });
  });

  it('patch-status prints the counts and what they allow; --json answers RunRepository.patchStatus', async () => {
    const res = await op(['patch-status', 'trig-patched', 'new-prompt']);
    expect(res.status).toBe(0);
    expect(res.stdout).toMatch(/open runs on the new path:\s+1/);
    expect(res.stdout).toMatch(/open runs that may take the old path:\s+0/);
    expect(res.stdout).toContain("replace patched('new-prompt') with deprecatePatch('new-prompt')");
    const json = await op(['patch-status', 'trig-patched', 'new-prompt', '--json']);
    expect(JSON.parse(json.stdout)).toEqual(JSON.parse(JSON.stringify(status)));
    const bad = await op(['patch-status', 'trig-patched', 'not ok!']);
    expect(bad.status).toBe(1);
    expect(bad.stderr).toMatch(/patchId must be 1-100 letters/);
    const nowhere = { DATABASE_URL: 'postgres://root@127.0.0.1:1/nowhere' };
    for (const args of [
      ['patch-status', 'trig-patched'],
      ['patch-status', 'k\u001b[2J', 'p'],
    ])
      expect((await op(args, nowhere)).status).toBe(2);
  });

  it('GET api/patch-status answers behind the admin guard, and names a bad field', async () => {
    const get = (query: string, headers: Record<string, string> = { 'x-api-key': KEY }) =>
      fetch(`${api}/patch-status?${query}`, { headers });
    const ok = await get('kind=trig-patched&patchId=new-prompt');
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual(JSON.parse(JSON.stringify(status)));
    expect((await get('kind=trig-patched&patchId=new-prompt', {})).status).toBe(401);
    const bad = await get('kind=trig-patched&patchId=not%20ok!');
    expect(bad.status).toBe(400);
    const body = (await bad.json()) as { errors: Array<{ field: string }> };
    expect(body.errors.map((e) => e.field)).toEqual(['patchId']);
    const noKind = await get('patchId=new-prompt');
    expect(noKind.status).toBe(400);
  });
});
