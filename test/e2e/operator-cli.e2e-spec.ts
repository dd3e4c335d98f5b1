import { INestApplication, Injectable } from '@nestjs/common';
import path from 'node:path';
import {
  CommandContext,
  DurableStep,
  DurableWorkflow,
  IdempotentCommand,
  NonRetryableError,
  RunContext,
  RunRepository,
} from '../../src';
import { cli } from '../../src/cli/main';
import { HIDDEN_DATA } from '../../src/cli/operator-context';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil } from '../helpers/drive';

/**
 * The operator CLI (issue 22, item 5): list, show with the trail, cancel, retry, signal, resolve,
 * approve, reject, workers, release-worker, schedules, pause and resume against the database URL, each through the same checks
 * as the admin API (a refused action exits 1 and changes nothing), with output a person reads and
 * `--json` for scripts, and run data shown only through a redact hook (`--app`) or on `--show-data`.
 */

const gateway = { down: false, lookupRefused: false, calls: [] as string[] };

@Injectable()
class OpSteps {
  @DurableStep({ name: 'lookup' })
  async lookup(card: string) {
    if (gateway.lookupRefused) throw new NonRetryableError('card lookup refused');
    return { card, found: true };
  }

  @IdempotentCommand({ name: 'charge', inDoubt: 'manual' })
  async charge(args: { amount: number }, ctx?: CommandContext) {
    gateway.calls.push(ctx!.idempotencyKey);
    if (gateway.down) throw new Error('504 from the gateway');
    return { chargeId: `ch_${args.amount}` };
  }

  @IdempotentCommand({ name: 'payout', inDoubt: 'manual', requiresApproval: true })
  async payout(args: { amount: number }) {
    return { paid: args.amount };
  }
}

@DurableWorkflow('op-order')
class OpOrderWorkflow {
  constructor(private readonly steps: OpSteps) {}
  async run(input: { card: string; amount: number; payout?: boolean }, ctx: RunContext) {
    const found = await this.steps.lookup(input.card);
    const charged = await this.steps.charge({ amount: input.amount });
    const paid = input.payout ? await this.steps.payout({ amount: input.amount }) : null;
    const ship = await ctx.waitForSignal<{ carrier: string }>('ship');
    return { found, charged, paid, ship };
  }
}

let db: TestDatabase;
let app: INestApplication;
let runs: RunRepository;

beforeAll(async () => {
  db = await createTestDatabase('opcli');
  app = await bootApp(db.url, [OpSteps, OpOrderWorkflow], { worker: { workerId: 'op-worker' } });
  runs = app.get(RunRepository);
});
afterAll(async () => {
  await app?.close();
  await db?.drop();
});
afterEach(() => {
  gateway.down = false;
  gateway.lookupRefused = false;
});

/** Runs the CLI in this process against the test database; its exit code and what it printed. */
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

async function json<T = any>(...args: string[]): Promise<T> {
  const res = await op(...args, '--json');
  expect({ status: res.status, stderr: res.stderr }).toEqual({ status: 0, stderr: '' });
  return JSON.parse(res.stdout) as T;
}

const start = async (input: { card: string; amount: number; payout?: boolean }) =>
  (await runs.start('op-order', input)).run.id;

const eventsOf = async (id: string, type: string) =>
  (await runs.events(id)).filter((e) => e.type === type).map((e) => e.payload);

describe('operator CLI', () => {
  it('list filters by kind and status, pages with --after, and --json answers what the admin API does', async () => {
    const ids = [await start({ card: '4242', amount: 1 }), await start({ card: '4343', amount: 2 })];
    const page = await json('list', '--kind', 'op-order', '--status', 'pending', '--status', 'failed');
    expect(page.items.map((r: { id: string }) => r.id)).toEqual([ids[1], ids[0]]);
    expect((await json('list', '--kind', 'op-order', '--status', 'succeeded')).items).toEqual([]);
    const first = await json('list', '--kind', 'op-order', '--limit', '1');
    expect(first.items).toHaveLength(1);
    expect(first.next).toEqual(expect.any(String));
    const human = await op('list', '--kind', 'op-order', '--limit', '1');
    expect(human.stdout).toMatch(/^ID\s+KIND\s+STATUS/);
    expect(human.stdout).toContain(`more: --after ${first.next}`);
    const rest = await json('list', '--kind', 'op-order', '--after', first.next);
    expect(rest.items.map((r: { id: string }) => r.id)).toContain(ids[0]);
    expect((await op('list', '--kind', 'nothing-here')).stdout).toBe('no runs match');
  });

  it('show prints the row, steps, commands and trail; run data is hidden without a hook, shown through --app', async () => {
    const id = await start({ card: '4111-secret', amount: 7 });
    await driveUntil(app, db, id, ['waiting']);
    const shown = await op('show', id);
    expect(shown).toMatchObject({ status: 0, stderr: '' });
    expect(shown.stdout).toContain(`run ${id}  kind op-order  status waiting`);
    expect(shown.stdout).toMatch(
      /steps \(1, \d+ engine entries hidden: --all shows them\):\n\s+#\s+NAME.*\n\s+0\s+lookup\s+compute\s+done/,
    );
    expect(shown.stdout).toMatch(/commands \(1\):\n.*\n\s+#1\s+charge\s+succeeded/);
    expect(shown.stdout).toContain('run.created');
    expect(shown.stdout).toContain(`input: ${HIDDEN_DATA}`);
    expect(shown.stdout).not.toContain('4111-secret');

    expect((await op('show', id, '--show-data')).stdout).toContain('4111-secret');
    process.env.OPERATOR_APP_DB_URL = db.url;
    const viaApp = await op(
      'show',
      id,
      '--app',
      path.join(__dirname, '../fixtures/operator-app.ts#OperatorAppModule'),
    );
    expect(viaApp.status).toBe(0);
    expect(viaApp.stdout).toContain('"card":"[card]"');
    expect(viaApp.stdout).not.toContain('4111-secret');
    const detail = await json('show', id, '--limit', '2');
    expect(detail.run.id).toBe(id);
    expect(detail.events).toHaveLength(2);
    expect(detail.eventsBefore).toEqual(expect.any(Number));
  });

  it('signal drives a waiting run on, recorded with --by; cancel, retry and a refused cancel', async () => {
    const id = await start({ card: '1', amount: 3 });
    await driveUntil(app, db, id, ['waiting']);
    const sent = await op('signal', id, 'ship', '--payload', '{"carrier":"dhl"}', '--by', 'ops@example.com');
    expect(sent).toMatchObject({ status: 0, stderr: '' });
    expect(sent.stdout).toContain('signal "ship" delivered');
    expect((await eventsOf(id, 'signal.sent'))[0]).toMatchObject({ name: 'ship', by: 'ops@example.com' });
    const done = await driveUntil(app, db, id);
    expect(done).toMatchObject({ status: 'succeeded', output: { ship: { carrier: 'dhl' } } });

    const refused = await op('cancel', id);
    expect(refused.status).toBe(1);
    expect(refused.stderr).toBe(
      `durable-execution cancel failed: Cannot cancel run ${id}: it is succeeded. Nothing was changed.`,
    );

    const other = await start({ card: '2', amount: 4 });
    const cancelled = await json('cancel', other, '--reason', 'customer asked', '--by', 'ops');
    expect(cancelled).toMatchObject({ by: 'ops', run: { id: other, status: 'cancelled' } });
    const notRetried = await op('retry', other);
    expect(notRetried.status).toBe(1);
    expect(notRetried.stderr).toContain(`Cannot retry run ${other}: it is cancelled`);

    gateway.lookupRefused = true;
    const failed = await start({ card: '3', amount: 5 });
    expect(await driveUntil(app, db, failed)).toMatchObject({
      status: 'failed',
      error: { message: 'card lookup refused' },
    });
    gateway.lookupRefused = false;
    const retried = await op('retry', failed, '--by', 'ops');
    expect(retried).toMatchObject({ status: 0, stderr: '' });
    expect(retried.stdout).toMatch(new RegExp(`^run ${failed}  kind op-order  status (pending|waiting)`));
    expect((await eventsOf(failed, 'run.retried'))[0]).toMatchObject({ by: 'ops' });
    // retry-held: the runs of a kind held on non-determinism, in one statement.
    const held = await start({ card: '4', amount: 6 });
    await db.query(
      `update ai_runs set status = 'waiting', available_at = 'infinity', parked_reason = 'held for a fixed deploy',
              error = '{"code":"DURABLE_NON_DETERMINISM","message":"recorded a, now b"}' where id = $1`,
      [held],
    );
    expect(await json('retry-held', 'op-order', '--by', 'ops')).toEqual({ by: 'ops', retried: 1 });
    expect((await op('retry-held', 'op-order')).stdout).toBe('0 held run(s) of op-order retried');
    const redriven = (await db.query(`select available_at, error from ai_runs where id = $1`, [held]))[0];
    expect([redriven.error, redriven.available_at <= new Date()]).toEqual([null, true]);
    expect((await eventsOf(held, 'run.retried'))[0]).toMatchObject({ by: 'ops' });
    expect(await driveUntil(app, db, failed, ['waiting'])).toMatchObject({
      parkedReason: 'waiting for signal "ship"',
    });
  });

  it('resolve settles an in-doubt command without calling again; approve lets an approval through', async () => {
    gateway.down = true;
    const id = await start({ card: '3', amount: 11 });
    const parked = await driveUntil(app, db, id, ['waiting']);
    expect(parked.parkedReason).toContain('in doubt');
    const key = `run_${id}:step_1:charge`;
    const listed = await json('list', '--in-doubt');
    expect(listed.items.map((r: { id: string }) => r.id)).toContain(id);
    expect((await op('resolve', id, key)).status).toBe(2); // no --as
    expect((await op('resolve', id, `${key}x`, '--as', 'retry')).stderr).toMatch(
      /resolve failed: No command with key .*chargex/,
    );
    const resolved = await op('resolve', id, key, '--as', 'succeeded', '--result', '{"chargeId":"from-ops"}');
    expect(resolved.status).toBe(0);
    expect(resolved.stdout).toContain(`command ${key} (charge, step 1): succeeded`);
    gateway.down = false;
    await driveUntil(app, db, id, ['waiting']);
    expect(gateway.calls.filter((k) => k === key)).toHaveLength(1);
    expect((await op('resolve', id, key, '--as', 'retry')).status).toBe(1); // settled already

    const payout = await start({ card: '4', amount: 12, payout: true });
    await driveUntil(app, db, payout, ['waiting']);
    const payoutKey = `run_${payout}:step_2:payout`;
    const approved = await json('approve', payout, payoutKey, '--note', 'checked', '--by', 'lead');
    expect(approved).toMatchObject({ by: 'lead', command: { status: 'approved' } });
    await op('signal', payout, 'ship', '--payload', '{"carrier":"ups"}');
    expect(await driveUntil(app, db, payout)).toMatchObject({
      status: 'succeeded',
      output: { paid: { paid: 12 } },
    });
  });

  it('workers lists presence rows and holders; release-worker refuses a live worker and hands a dead one on', async () => {
    const id = await start({ card: '5', amount: 13 });
    await db.query(
      `update ai_runs set status = 'running', worker_id = 'pod-gone', epoch = 1, attempts = 1,
              lease_expires_at = now() + interval '1 minute' where id = $1`,
      [id],
    );
    await db.query(
      `insert into ai_workers (worker_id, kinds, expires_at) values ('pod-live', '{op-order}', now() + interval '30 seconds')`,
    );
    const workers =
      await json<{ workerId: string; live: boolean; running: number; kinds: string[] | null }[]>('workers');
    expect(workers).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ workerId: 'pod-live', live: true, running: 0, kinds: ['op-order'] }),
        expect.objectContaining({ workerId: 'pod-gone', live: false, running: 1, kinds: null }),
      ]),
    );
    expect((await op('workers')).stdout).toMatch(/pod-gone\s+no\s+1\s+\(no presence row\)/);

    const refused = await op('release-worker', 'pod-live');
    expect(refused.status).toBe(1);
    expect(refused.stderr).toContain('workerId is a live worker');
    const forced = await op('release-worker', 'pod-live', '--force');
    expect(forced).toMatchObject({ status: 0, stdout: 'released 0 run(s) of worker pod-live' });

    const released = await op('release-worker', 'pod-gone');
    expect(released.status).toBe(0);
    expect(released.stdout).toContain(`released 1 run(s) of worker pod-gone\n  ${id}  waiting`);
    expect((await eventsOf(id, 'run.reconciled'))[0]).toMatchObject({ reason: 'worker_gone' });
    expect(await driveUntil(app, db, id, ['waiting'])).toMatchObject({ workerId: null });
  });

  it('versions counts the runs pinned to each version and the live workers of each; retry-held takes --version', async () => {
    const ids = [
      (await runs.start('op-order', { card: '6', amount: 1 }, { version: 3 })).run.id,
      (await runs.start('op-order', { card: '7', amount: 1 }, { version: 3 })).run.id,
    ];
    await db.query(
      `insert into ai_workers (worker_id, kinds, versions, expires_at)
       values ('pod-v3', '{op-order}', '{"op-order": [3, 1]}', now() + interval '30 seconds')`,
    );
    const row = { kind: 'op-order', version: 3, pending: 2, waiting: 0, running: 0, held: 0, workers: 1 };
    expect(await json('versions', '--kind', 'op-order')).toContainEqual(row);
    expect((await op('versions', '--kind', 'op-order')).stdout).toMatch(
      /\nop-order\s+3\s+2\s+0\s+0\s+0\s+1\n/,
    );
    expect((await op('workers')).stdout).toMatch(/pod-v3\s+yes\s+0\s+op-order@3\+1\s/);
    // This process's worker registers version 1 only: a tick claims neither run.
    expect(await driveUntil(app, db, ids[0], ['pending'])).toMatchObject({ epoch: 0, version: 3 });
    expect(await json('retry-held', 'op-order', '--version', '3')).toMatchObject({ retried: 0 });
    const bad = await op('retry-held', 'op-order', '--version', '0');
    expect([bad.status, bad.stderr]).toEqual([
      2,
      expect.stringContaining('--version must be a whole number >= 1'),
    ]);
    for (const id of ids) await runs.cancel(id);
    await db.query(`delete from ai_workers where worker_id = 'pod-v3'`);
  });

  it('schedules lists the @DurableCron schedules; pause and resume one; an unknown name exits 1', async () => {
    await db.query(
      `insert into ai_schedules (name, kind, cron, next_at) values ('nightly', 'op-order', '0 2 * * *', now() + interval '1 hour')`,
    );
    expect((await op('schedules')).stdout).toMatch(/nightly\s+op-order\s+0 2 \* \* \*\s+UTC\s+\S+\s+-\s+no/);
    expect(await json('pause', 'nightly')).toMatchObject({ name: 'nightly', paused: true });
    expect(await json('schedules')).toEqual([expect.objectContaining({ name: 'nightly', paused: true })]);
    expect(await json('resume', 'nightly')).toMatchObject({ name: 'nightly', paused: false });
    const missing = await op('pause', 'nope');
    expect(missing.status).toBe(1);
    expect(missing.stderr).toContain('No schedule is named "nope"');
  });

  it('create-schedule and remove-schedule make and delete a schedule at run time; bad options name the field', async () => {
    const made = await json(
      'create-schedule',
      'hourly-sync',
      'op-order',
      '0 * * * *',
      '--timezone',
      'Europe/Berlin',
      '--input',
      '{"sku":"A-1"}',
      '--overlap',
      'queue',
      '--concurrency-key',
      'acme',
    );
    expect(made).toMatchObject({
      name: 'hourly-sync',
      kind: 'op-order',
      cron: '0 * * * *',
      timezone: 'Europe/Berlin',
      overlap: 'queue',
      catchUp: 'latest',
      concurrencyKey: 'acme',
      source: 'api',
      paused: false,
    });
    const [row] = await db.query(
      `select input, concurrency_key from ai_schedules where name = 'hourly-sync'`,
    );
    expect(row).toEqual({ input: { sku: 'A-1' }, concurrency_key: 'acme' });
    expect((await op('schedules')).stdout).toMatch(/hourly-sync\s+op-order\s+0 \* \* \* \*\s+Europe\/Berlin/);

    const badTz = await op('create-schedule', 'x', 'op-order', '0 * * * *', '--timezone', 'Mars/Olympus');
    expect(badTz.status).toBe(1);
    expect(badTz.stderr).toMatch(/timezone/);
    const badOverlap = await op('create-schedule', 'x', 'op-order', '0 * * * *', '--overlap', 'never');
    expect(badOverlap.status).toBe(1);
    expect(badOverlap.stderr).toMatch(/overlap must be 'allow', 'skip' or 'queue'/);
    const badCron = await op('create-schedule', 'x', 'op-order', 'every hour');
    expect(badCron.status).toBe(1);
    expect(badCron.stderr).toMatch(/cron/);
    const badInput = await op('create-schedule', 'x', 'op-order', '0 * * * *', '--input', '{nope');
    expect(badInput.status).toBe(2);
    expect(await db.query(`select 1 from ai_schedules where name = 'x'`)).toEqual([]);

    // A @DurableCron's name is refused; removing one so made is refused too (pause it instead).
    await db.query(
      `insert into ai_schedules (name, kind, cron, next_at) values ('coded', 'op-order', '0 2 * * *', now() + interval '1 hour')`,
    );
    const taken = await op('create-schedule', 'coded', 'op-order', '0 * * * *');
    expect(taken.status).toBe(1);
    expect(taken.stderr).toContain('is a @DurableCron schedule of the code');
    const keep = await op('remove-schedule', 'coded');
    expect(keep.status).toBe(1);
    expect(keep.stderr).toContain('pause it instead');

    expect(await op('remove-schedule', 'hourly-sync')).toMatchObject({
      status: 0,
      stdout: 'schedule hourly-sync removed (its runs stay)',
    });
    expect(await db.query(`select 1 from ai_schedules where name = 'hourly-sync'`)).toEqual([]);
    const gone = await op('remove-schedule', 'hourly-sync');
    expect(gone.status).toBe(1);
    expect(gone.stderr).toContain('No schedule is named "hourly-sync"');
  });

  it('bad words and flags exit 2 with the usage before connecting; an unknown run exits 1', async () => {
    const env = { DATABASE_URL: 'postgres://root@127.0.0.1:1/nowhere' };
    for (const args of [
      ['show'],
      ['show', 'a', 'b'],
      ['list', '--status', 'done'],
      ['list', '--limit', '0'],
      ['cancel', 'x', '--payload', '1'],
      ['signal', 'x', 'ship', '--payload', '{bad'],
      ['show', 'x', '--app', 'a.js', '--show-data'],
      ['resolve', 'x', 'k', '--as', 'failed'],
    ]) {
      const err: string[] = [];
      const status = await cli(
        args,
        env,
        () => undefined,
        (l) => err.push(l),
      );
      expect({ args, status }).toEqual({ args, status: 2 });
      expect(err.join('\n')).toContain('Usage: nestjs-durable-execution <command>');
    }
    const missing = await op('show', '00000000-0000-4000-8000-000000000000');
    expect(missing.status).toBe(1);
    expect(missing.stderr).toMatch(/^durable-execution show failed: .*00000000-0000-4000-8000-000000000000/);
    const notUuid = await op('cancel', 'not-a-run'); // a bad RUN word is a usage error (issue 36, part 5)
    expect(notUuid).toMatchObject({ status: 2, stdout: '' });
    expect(notUuid.stderr).toContain('RUN must be a run id (a UUID');
  });
});
