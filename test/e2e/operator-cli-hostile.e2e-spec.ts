import { INestApplication } from '@nestjs/common';
import { DurableWorkflow, RunContext, RunRepository } from '../../src';
import { cli } from '../../src/cli/main';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';

/**
 * Issue 36, part 5: the operator CLI under hostile input. Whatever it prints (a run's kind, a schedule's
 * name, kind and cron, a cancel reason, an error quoting a name), in its table lines and in `--json`,
 * has every control, line separator and bidi control character escaped (`\u001b`), so a stored value can
 * neither drive the terminal nor forge a line. A RUN that is not a UUID and a `--reason` over the admin
 * API's 500-character cap are usage errors (exit 2) before anything connects; a bad schedule or signal
 * name and a cron that never fires are refused (exit 1) naming the field, with nothing written.
 */

@DurableWorkflow('cli-safe')
class CliSafeWorkflow {
  async run(_input: unknown, ctx: RunContext) {
    return ctx.waitForSignal('go');
  }
}

/** A value that, printed raw, paints the terminal, clears it and forges a Nest log line. */
const HOSTILE = `evil\u001b[31m\u001b[2J\n[Nest] 1  - LOG [DurableExecution] forged\u0085x\u2028y\u202egnp.exe\u009b`;
/** Every character the CLI must never print raw (line breaks between lines excepted: checked per line). */
// eslint-disable-next-line no-control-regex
const RAW = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/;

let db: TestDatabase;
let app: INestApplication;
let runs: RunRepository;

beforeAll(async () => {
  db = await createTestDatabase('opcli_hostile');
  app = await bootApp(db.url, [CliSafeWorkflow]);
  runs = app.get(RunRepository);
});
afterAll(async () => {
  await app?.close();
  await db?.drop();
});

/** Runs the CLI in this process; its exit code and the lines it printed. */
async function op(...args: string[]) {
  const stdout: string[] = [];
  const stderr: string[] = [];
  const status = await cli(
    args,
    { DATABASE_URL: db.url },
    (l) => stdout.push(...l.split('\n')),
    (l) => stderr.push(...l.split('\n')),
  );
  return { status, stdout, stderr, text: [...stdout, ...stderr].join('\n') };
}

/** No line holds a raw control, separator or bidi character, and none starts a forged log line. */
function expectSafe(lines: string[], what: string): void {
  const bad = lines.filter((l) => RAW.test(l) || l.startsWith('[Nest]'));
  expect({ what, bad }).toEqual({ what, bad: [] });
}

const count = async (sql: string, params: unknown[] = []) => Number((await db.query(sql, params))[0].n);

describe('operator CLI under hostile input', () => {
  it('list, show, versions and schedules escape what they print, in lines and in --json', async () => {
    const pending = (await runs.start('cli-safe', {})).run.id;
    await db.query(`update ai_runs set kind = $1 where id = $2`, [HOSTILE, pending]);
    const cancelled = (await runs.start('cli-safe', {})).run.id;
    await runs.cancel(cancelled, `why${HOSTILE}`); // free text: stored as given, printed escaped
    await db.query(
      `insert into ai_schedules (name, kind, cron, next_at, source) values ($1, $1, $1, now() + interval '1 hour', 'api')`,
      [HOSTILE],
    );
    const escaped = 'evil\\u001b[31m\\u001b[2J';
    for (const args of [
      ['list'],
      ['show', pending],
      ['show', cancelled, '--show-data'],
      ['versions'],
      ['schedules'],
    ]) {
      const human = await op(...args);
      expect({ args, status: human.status, stderr: human.stderr }).toEqual({ args, status: 0, stderr: [] });
      expectSafe(human.stdout, args.join(' '));
      expect(human.text).toContain(escaped);
      expect(human.text).toContain('\\u0085x\\u2028y\\u202egnp.exe\\u009b');
      const json = await op(...args, '--json');
      expect(json.status).toBe(0);
      expectSafe(json.stdout, `${args.join(' ')} --json`);
      expect(JSON.stringify(JSON.parse(json.stdout.join('\n')))).toContain(
        JSON.stringify(HOSTILE).slice(1, -1),
      ); // the value as stored
    }
    // The table's columns still line up: the escaped kind is one cell.
    const list = (await op('list')).stdout;
    expect(list[0].indexOf('STATUS')).toBe(list.find((l) => l.includes(pending))!.indexOf('pending'));
    // Such a row stays usable: pause and remove-schedule take its name as stored; errors quoting a name are escaped.
    expect(await op('pause', HOSTILE)).toMatchObject({ status: 0 });
    const missing = await op('pause', `nope${HOSTILE}`);
    expect(missing.status).toBe(1);
    expectSafe(missing.stderr, 'pause error');
    expect(await op('remove-schedule', HOSTILE)).toMatchObject({ status: 0 });
    expect(await count(`select count(*) as n from ai_schedules`)).toBe(0);
  });

  it('a RUN that is not a UUID is a usage error (exit 2), not a raw PostgreSQL error', async () => {
    for (const args of [
      ['show', 'not-a-uuid'],
      ['cancel', 'not-a-uuid'],
      ['retry', "1'; drop table ai_runs; --"],
      ['signal', 'not-a-uuid', 'go'],
      ['approve', 'x', 'key'],
    ]) {
      const res = await op(...args);
      expect({ args, status: res.status }).toEqual({ args, status: 2 });
      expect(res.stderr[0]).toMatch(/^nestjs-durable-execution: RUN must be a run id \(a UUID/);
      expect(res.text).not.toMatch(/invalid input syntax|uuid:/);
    }
    const hostile = await op('show', `x${HOSTILE}`);
    expect(hostile.status).toBe(2);
    expectSafe(hostile.stderr, 'usage error');
  });

  it('cancel --reason takes what the admin API takes (at most 500 characters), checked before connecting', async () => {
    const id = (await runs.start('cli-safe', {})).run.id;
    for (const reason of ['r'.repeat(100_000), 'r'.repeat(501)]) {
      const res = await op('cancel', id, '--reason', reason);
      expect(res.status).toBe(2);
      expect(res.stderr[0]).toBe(
        `nestjs-durable-execution: --reason must be at most 500 characters, got ${reason.length}`,
      );
    }
    const byBidi = await op('cancel', id, '--by', 'ops\u202enimda');
    expect(byBidi.status).toBe(2);
    expect(byBidi.stderr[0]).toMatch(/--by must not contain control characters .*U\+202E/);
    expect((await runs.get(id))!.status).toBe('pending');
    expect(
      await count(`select count(*) as n from ai_events where run_id = $1 and event_type like 'run.cancel%'`, [
        id,
      ]),
    ).toBe(0);
    const ok = await op('cancel', id, '--reason', 'r'.repeat(500), '--json');
    expect(ok.status).toBe(0);
    expect((await runs.get(id))!).toMatchObject({ status: 'cancelled', cancelReason: 'r'.repeat(500) });
  });

  it('create-schedule and signal refuse a hostile name or a cron that never fires, naming the field (exit 1), nothing written', async () => {
    const feb30 = await op('create-schedule', 'feb-30', 'cli-safe', '0 0 30 2 *');
    expect(feb30.status).toBe(1);
    expect(feb30.stderr).toEqual([
      expect.stringMatching(
        /^durable-execution create-schedule failed: cron never fires: .*Nothing was written\.$/,
      ),
    ]);
    for (const [name, kind, cron, field] of [
      [HOSTILE, 'cli-safe', '0 3 * * *', 'name'],
      ['nightly', `cli-safe\u2028`, '0 3 * * *', 'kind'],
      ['nightly', 'cli-safe', '0 3 * * *\n', 'cron'],
    ]) {
      const res = await op('create-schedule', name, kind, cron);
      expect({ field, status: res.status }).toEqual({ field, status: 1 });
      expect(res.stderr[0]).toMatch(new RegExp(`failed: ${field} must not contain control characters`));
      expectSafe(res.stderr, `create-schedule ${field}`);
    }
    expect(await count(`select count(*) as n from ai_schedules`)).toBe(0);

    const id = (await runs.start('cli-safe', {})).run.id;
    const signal = await op('signal', id, 'go\n[Nest] forged');
    expect(signal.status).toBe(1);
    expect(signal.stderr[0]).toMatch(/failed: name must not contain control characters .*U\+000A/);
    expect(await count(`select count(*) as n from ai_signals`)).toBe(0);
  });
});
