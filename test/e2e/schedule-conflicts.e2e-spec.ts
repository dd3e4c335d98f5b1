import { INestApplication, Logger } from '@nestjs/common';
import { DurableCron, DurableSchedules, DurableWorkflow } from '../../src';
import { DurableAdminModule } from '../../src/admin';
import { cli } from '../../src/cli/main';
import { DURABLE_EXECUTION_OPTIONS } from '../../src/durable-execution.constants';
import { DurableRegistry } from '../../src/engine/durable.registry';
import { ScheduleRunner } from '../../src/maintenance/schedule-runner.service';
import { ScheduleStore } from '../../src/store/schedules.store';
import { WorkerPresenceStore } from '../../src/store/worker-presence.store';
import { bootHttpApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';

/**
 * Issue 36, part 5 (security review): a schedule's name is not taken over silently. Creating one with
 * a name in use (admin API, CLI, DurableSchedules.create) is a typed 409 unless the caller asks to
 * replace it; a `@DurableCron` declared later with that name does not replace one made at run time
 * (it takes the name once that one is removed), while its own row is declared again at every boot. A
 * schedule of a kind nothing serves is refused under `unservedKinds: 'refuse'`, else warned about.
 */

@DurableCron('0 2 * * *')
@DurableWorkflow('nightly-late')
class NightlyLate {
  async run() {
    return 1;
  }
}

@DurableCron('0 3 * * *', { name: 'own-cron' })
@DurableWorkflow('own-kind')
class OwnCron {
  async run() {
    return 1;
  }
}

const POST_JSON = { method: 'POST', headers: { 'content-type': 'application/json' } };

let db: TestDatabase;
let app: INestApplication;
let http: string;

beforeAll(async () => {
  db = await createTestDatabase('sched_conflict');
  ({ app, http } = await bootHttpApp(db.url, {
    imports: [DurableAdminModule.forRoot({ allowAnonymous: true })],
    providers: [NightlyLate, OwnCron],
    options: { unservedKinds: 'refuse' },
  }));
});
afterAll(async () => {
  await app?.close();
  await db?.drop();
});

const post = (body: unknown) =>
  fetch(`${http}/durable/api/schedules`, { ...POST_JSON, body: JSON.stringify(body) });
const rowOf = async (name: string) =>
  (await db.query(`select kind, cron, source from ai_schedules where name = $1`, [name]))[0];

async function op(...args: string[]) {
  const stdout: string[] = [];
  const stderr: string[] = [];
  const status = await cli(
    args,
    { DATABASE_URL: db.url },
    (l) => stdout.push(...l.split('\n')),
    (l) => stderr.push(...l.split('\n')),
  );
  return { status, stdout: stdout.join('\n'), stderr: stderr.join('\n') };
}

describe('schedule names are not taken over silently', () => {
  it('POST api/schedules: a name in use is a 409 naming what to do, unless replace: true', async () => {
    const body = { name: 'sync', kind: 'own-kind', cron: '0 * * * *' };
    expect((await post(body)).status).toBe(201);
    const again = await post({ ...body, cron: '*/5 * * * *', input: { hijacked: true } });
    expect(again.status).toBe(409);
    expect(await again.json()).toMatchObject({
      statusCode: 409,
      code: 'DURABLE_SCHEDULE_CONFLICT',
      message: expect.stringContaining('replace: true'),
    });
    expect(await rowOf('sync')).toEqual({ kind: 'own-kind', cron: '0 * * * *', source: 'api' });

    for (const replace of ['yes', 1, null, {}]) {
      const bad = await post({ ...body, cron: '*/5 * * * *', replace });
      expect(bad.status).toBe(400);
      expect(((await bad.json()) as { errors: unknown }).errors).toEqual([
        expect.objectContaining({ field: 'replace' }),
      ]);
    }
    const replaced = await post({ ...body, cron: '*/5 * * * *', replace: true });
    expect(replaced.status).toBe(201);
    expect(await rowOf('sync')).toEqual({ kind: 'own-kind', cron: '*/5 * * * *', source: 'api' });
    // replace never takes a @DurableCron's name.
    await app.get(ScheduleRunner).tick();
    const code = await post({ name: 'own-cron', kind: 'own-kind', cron: '* * * * *', replace: true });
    expect(code.status).toBe(400);
    expect(await rowOf('own-cron')).toEqual({ kind: 'own-kind', cron: '0 3 * * *', source: 'code' });
  });

  it('DurableSchedules.create throws ScheduleConflictError; a new name and replace write', async () => {
    const schedules = app.get(DurableSchedules);
    await schedules.create('svc', 'own-kind', '0 1 * * *');
    await expect(schedules.create('svc', 'own-kind', '0 4 * * *')).rejects.toMatchObject({
      code: 'DURABLE_SCHEDULE_CONFLICT',
      scheduleName: 'svc',
    });
    await expect(
      schedules.create('svc', 'own-kind', '0 4 * * *', { replace: 'true' as never }),
    ).rejects.toMatchObject({ code: 'DURABLE_INVALID_ARGUMENT', field: 'replace' });
    expect(await rowOf('svc')).toMatchObject({ cron: '0 1 * * *' });
    await schedules.create('svc', 'own-kind', '0 4 * * *', { replace: true });
    expect(await rowOf('svc')).toMatchObject({ cron: '0 4 * * *' });
  });

  it('CLI create-schedule: a name in use fails (exit 1) unless --replace', async () => {
    expect((await op('create-schedule', 'cli-sync', 'own-kind', '0 * * * *')).status).toBe(0);
    const again = await op('create-schedule', 'cli-sync', 'own-kind', '*/5 * * * *');
    expect(again.status).toBe(1);
    expect(again.stderr).toContain('already named "cli-sync"');
    expect(await rowOf('cli-sync')).toMatchObject({ cron: '0 * * * *' });
    const replaced = await op('create-schedule', 'cli-sync', 'own-kind', '*/5 * * * *', '--replace');
    expect(replaced.status).toBe(0);
    expect(await rowOf('cli-sync')).toMatchObject({ cron: '*/5 * * * *' });
  });

  it('a @DurableCron declared later does not replace a schedule made at run time; its own row is declared again', async () => {
    const error = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    try {
      // The @DurableCron's default name (its kind) was taken at run time before any process declared it.
      await db.query(`delete from ai_schedules where name in ('nightly-late', 'own-cron')`);
      expect((await post({ name: 'nightly-late', kind: 'own-kind', cron: '*/10 * * * *' })).status).toBe(201);
      const runner = new ScheduleRunner(
        app.get(ScheduleStore),
        app.get(DurableRegistry),
        app.get(DURABLE_EXECUTION_OPTIONS),
        app.get(ScheduleRunner)['jobs'],
        app.get(ScheduleRunner)['limits'],
      );
      await runner.tick();
      await runner.tick();
      expect(await rowOf('nightly-late')).toEqual({ kind: 'own-kind', cron: '*/10 * * * *', source: 'api' });
      expect(await rowOf('own-cron')).toEqual({ kind: 'own-kind', cron: '0 3 * * *', source: 'code' });
      const logged = error.mock.calls.map((c) => String(c[0])).filter((m) => m.includes("'nightly-late'"));
      expect(logged).toHaveLength(1); // once, not at every tick
      expect(logged[0]).toContain('remove-schedule nightly-late');
      // Its own row is no conflict: declared again (a new process at boot) it stays the code's.
      await runner.tick();
      expect(await rowOf('own-cron')).toMatchObject({ source: 'code' });
      // Once the run-time one is removed, the @DurableCron takes its name at the next tick.
      await app.get(DurableSchedules).remove('nightly-late');
      await runner.tick();
      expect(await rowOf('nightly-late')).toEqual({
        kind: 'nightly-late',
        cron: '0 2 * * *',
        source: 'code',
      });
    } finally {
      error.mockRestore();
    }
  });
});

describe('a schedule of a kind nothing serves', () => {
  it("unservedKinds: 'refuse': 503 DURABLE_NO_WORKER_FOR_KIND, nothing written", async () => {
    const res = await post({ name: 'ghost', kind: 'nobody-runs-this', cron: '0 * * * *' });
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({
      code: 'DURABLE_NO_WORKER_FOR_KIND',
      message: expect.stringContaining('the schedule was not created'),
    });
    expect(await rowOf('ghost')).toBeUndefined();
  });

  it("unservedKinds: 'warn': created, with a warning naming the kind; the CLI prints one too", async () => {
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    try {
      const schedules = new DurableSchedules(
        app.get(ScheduleStore),
        app.get(DurableRegistry),
        app.get(WorkerPresenceStore),
        { ...app.get(DURABLE_EXECUTION_OPTIONS), unservedKinds: 'warn' },
      );
      await schedules.create('ghost-warned', 'nobody-runs-this', '0 * * * *');
      expect(await rowOf('ghost-warned')).toMatchObject({ kind: 'nobody-runs-this' });
      expect(warn.mock.calls.map((c) => String(c[0]))).toContainEqual(
        expect.stringContaining('"nobody-runs-this", which no live worker serves'),
      );
      await schedules.create('registered-here', 'own-kind', '0 * * * *');
      expect(warn).toHaveBeenCalledTimes(1);
    } finally {
      warn.mockRestore();
    }
    const made = await op('create-schedule', 'ghost-cli', 'nobody-runs-that', '0 * * * *');
    expect(made.status).toBe(0);
    expect(made.stdout).toContain('warning: no live worker serves kind "nobody-runs-that"');
  });
});
