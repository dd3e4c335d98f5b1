import { INestApplication } from '@nestjs/common';
import {
  DurableCron,
  DurableSchedules,
  DurableWorkflow,
  InvalidArgumentError,
  RunContext,
  RunRepository,
} from '../../src';
import { DurableAdminModule } from '../../src/admin';
import { DurableUsageError } from '../../src/errors/durable-usage.error';
import { ScheduleRunner } from '../../src/maintenance/schedule-runner.service';
import { bootHttpApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil } from '../helpers/drive';

/**
 * Issue 36, part 5 (a security review of what callers and operators send): one rule for every identifier
 * (a kind, a schedule's name, kind and cron, a signal name, a stream topic, a tag, a concurrency key). C0
 * and C1 controls, U+2028/U+2029 and bidi controls are an InvalidArgumentError (a 400 from the admin API)
 * naming the field, before anything is written; a cron that never fires is one too (not a raw CronError).
 * Rows stored before the rule stay readable and can be paused and removed.
 */

@DurableWorkflow('safe-kind')
class SafeWorkflow {
  async run(input: { topic?: string }, ctx: RunContext) {
    if (input.topic) await ctx.emit(input.topic, { at: 1 });
    return 'done';
  }
}

/** A line a Nest log would print: a kind ending in it would forge a worker log line. */
const FORGED = '[Nest] 4242  - 01/01/2026, 00:00:00     LOG [DurableExecution] run 42 succeeded';

/** Each character the rule refuses, inside an otherwise fine identifier. */
const HOSTILE: Array<[string, string]> = [
  ['newline', `evil\n${FORGED}`],
  ['ESC', 'evil\u001b[31mred'],
  ['tab', 'a\tb'],
  ['DEL', 'a\u007fb'],
  ['NEL (U+0085)', `evil\u0085${FORGED}`],
  ['CSI (U+009B)', 'a\u009b2Jb'],
  ['U+2028', `evil\u2028${FORGED}`],
  ['U+2029', 'a\u2029b'],
  ['U+061C', 'a\u061cb'],
  ['U+200E', 'a\u200eb'],
  ['U+200F', 'a\u200fb'],
  ['U+202A', 'a\u202ab'],
  ['U+202E', 'invoice\u202efdp.exe'],
  ['U+2066', 'a\u2066b'],
  ['U+2069', 'a\u2069b'],
];
const RULE = /must not contain control characters .*found U\+[0-9A-F]{4} at index \d+/;

describe('hostile identifiers (issue 36, part 5)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let http: string;
  let runs: RunRepository;
  let schedules: DurableSchedules;
  const count = async (table: string) => Number((await db.query(`select count(*) as n from ${table}`))[0].n);
  const post = (path: string, body: unknown) =>
    fetch(`${http}/durable/api/${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });

  beforeAll(async () => {
    db = await createTestDatabase('hostile_ids');
    ({ app, http } = await bootHttpApp(db.url, {
      imports: [DurableAdminModule.forRoot({ allowAnonymous: true })],
      providers: [SafeWorkflow],
    }));
    runs = app.get(RunRepository);
    schedules = app.get(DurableSchedules);
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('start() refuses a kind, a concurrency key or a tag value with any of them, naming the field; nothing is written', async () => {
    const before = await count('ai_runs');
    for (const [what, text] of HOSTILE) {
      const cases: Array<[string, () => Promise<unknown>]> = [
        ['kind', () => runs.start(text, {})],
        ['concurrencyKey', () => runs.start('safe-kind', {}, { concurrencyKey: text })],
        ['tags.tenant', () => runs.start('safe-kind', {}, { tags: { tenant: text } })],
      ];
      for (const [field, call] of cases) {
        const err = await call().catch((e) => e);
        expect({ what, field, err }).toEqual({ what, field, err: expect.any(InvalidArgumentError) });
        expect((err as InvalidArgumentError).field).toBe(field);
        expect((err as Error).message).toMatch(RULE);
      }
    }
    expect(await count('ai_runs')).toBe(before);
  });

  it('a signal name with any of them is refused by RunRepository and the admin API (400 naming name); nothing is stored', async () => {
    const { run } = await runs.start('safe-kind', {});
    for (const [what, name] of HOSTILE) {
      const err = await runs.signal(run.id, name, { ok: true }).catch((e) => e);
      expect({ what, err }).toEqual({ what, err: expect.any(InvalidArgumentError) });
      expect((err as InvalidArgumentError).field).toBe('name');
      const res = await post(`runs/${run.id}/signal`, { name, payload: 1 });
      const body = (await res.json()) as { code: string; errors: Array<{ field: string }> };
      expect({ what, status: res.status, code: body.code, field: body.errors?.[0]?.field }).toEqual({
        what,
        status: 400,
        code: 'DURABLE_INVALID_ARGUMENT',
        field: 'name',
      });
    }
    expect(await count('ai_signals')).toBe(0);
  });

  it('a stream topic with one of them stops the run as misuse (the same rule), and no entry is written', async () => {
    const { run } = await runs.start('safe-kind', { topic: 'phase\u2028[Nest] forged' });
    const ended = await driveUntil(app, db, run.id);
    expect(ended.status).toBe('failed');
    expect(ended.error?.message).toMatch(/topic must not contain control characters .*U\+2028/);
    expect(await runs.stream(run.id)).toEqual([]);
  });

  it('a schedule name, kind or cron with any of them is refused by DurableSchedules and POST api/schedules; nothing is written or fired', async () => {
    const good = { name: 'nightly', kind: 'safe-kind', cron: '0 3 * * *' };
    for (const [what, text] of HOSTILE) {
      for (const field of ['name', 'kind', 'cron'] as const) {
        const s = { ...good, [field]: field === 'cron' ? `0 3 * * *${text}` : text };
        const err = await schedules.create(s.name, s.kind, s.cron).catch((e) => e);
        expect({ what, field, err }).toEqual({ what, field, err: expect.any(InvalidArgumentError) });
        expect((err as InvalidArgumentError).field).toBe(field);
        expect((err as Error).message).toMatch(RULE);
        const res = await post('schedules', s);
        const body = (await res.json()) as { code: string; errors: Array<{ field: string }> };
        expect({ what, field, status: res.status, code: body.code, at: body.errors?.[0]?.field }).toEqual({
          what,
          field,
          status: 400,
          code: 'DURABLE_INVALID_ARGUMENT',
          at: field,
        });
      }
    }
    // The line "`* * * * * *` then a newline" is a cron the cron package reads: refused all the same.
    const trailing = await schedules.create('every', 'safe-kind', '* * * * * *\n').catch((e) => e);
    expect(trailing).toMatchObject({ field: 'cron' });
    expect(await count('ai_schedules')).toBe(0);
    expect(await app.get(ScheduleRunner).tick()).toBe(0);
  });

  it('a cron that never fires (the 30th of February) is a 400 naming cron, not a 500 with a CronError; nothing is written', async () => {
    for (const cron of ['0 0 30 2 *', '0 0 31 4 *', '0 0 0 30 2 *']) {
      const err = await schedules.create('feb-30', 'safe-kind', cron).catch((e) => e);
      expect(err).toBeInstanceOf(InvalidArgumentError);
      expect((err as InvalidArgumentError).field).toBe('cron');
      expect((err as Error).message).toMatch(/^cron never fires: .*Nothing was written\.$/);
      const res = await post('schedules', { name: 'feb-30', kind: 'safe-kind', cron });
      expect(res.status).toBe(400);
      const body = (await res.json()) as { code: string; message: string; errors: unknown };
      expect(body).toMatchObject({
        code: 'DURABLE_INVALID_ARGUMENT',
        errors: [{ field: 'cron', messages: [expect.stringMatching(/never fires/)] }],
      });
      expect(JSON.stringify(body)).not.toMatch(/CronError|Something went wrong|\bat \w+ \(/);
    }
    expect(await count('ai_schedules')).toBe(0);
    // A leap day fires (in 8 years at most), so it is fine; a @DurableCron that never fires fails at load.
    await expect(schedules.create('leap', 'safe-kind', '0 0 29 2 *')).resolves.toMatchObject({
      name: 'leap',
    });
    await schedules.remove('leap');
    expect(() => DurableCron('0 0 30 2 *')(class Never {})).toThrow(DurableUsageError);
    expect(() => DurableCron('0 0 30 2 *')(class Never {})).toThrow(/cron never fires/);
    expect(() => DurableCron('* * * * *', { name: 'a\u202eb' })(class Bidi {})).toThrow(
      /name must not contain/,
    );
  });

  it('a row stored before the rule stays readable, and can still be paused and removed by its name', async () => {
    const legacy = `old\u001b[2J\n${FORGED}\u202e`;
    await schedules.create('legacy', 'safe-kind', '0 4 * * *');
    await db.query(`update ai_schedules set name = $1, kind = $1 where name = 'legacy'`, [legacy]);
    const list = (await (await fetch(`${http}/durable/api/schedules`)).json()) as Array<{ name: string }>;
    expect(list.map((s) => s.name)).toEqual([legacy]);
    // Made again today, the same name is refused; the stored row is read, paused and removed as it is.
    await expect(schedules.create(legacy, 'safe-kind', '0 4 * * *')).rejects.toMatchObject({ field: 'name' });
    await expect(schedules.pause(legacy)).resolves.toMatchObject({
      name: legacy,
      kind: legacy,
      paused: true,
    });
    const del = await fetch(`${http}/durable/api/schedules/${encodeURIComponent(legacy)}`, {
      method: 'DELETE',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    expect(del.status).toBe(204);
    expect(await count('ai_schedules')).toBe(0);
  });
});
