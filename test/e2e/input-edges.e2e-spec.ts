import { INestApplication, Injectable } from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import {
  CommandGateway,
  DurableWorkflow,
  IdempotencyConflictError,
  IdempotentCommand,
  RunContext,
  RunRepository,
} from '../../src';
import { DurableAdminModule } from '../../src/admin';
import { EchoWorkflow, OtherWorkflow } from '../fixtures/echo-workflows';
import { bootHttpApp } from '../helpers/app';
import { DurableWorker } from '../../src/engine/worker.service';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil } from '../helpers/drive';

/**
 * Input at the edges of what PostgreSQL accepts, through the public API and the admin REST API:
 * each bad value is a typed error (a 400 over HTTP) naming the field, and nothing is written.
 */
const NUL = 'a\u0000b';
const LONE = 'a\ud800b';
const MISSING = '00000000-0000-4000-8000-000000000000';
let failCharge = true;

@Injectable()
class Payments {
  @IdempotentCommand({
    name: 'charge',
    inDoubt: 'manual',
    requiresApproval: (a: { amount: number }) => a.amount > 100,
  })
  async charge(args: { amount: number }) {
    if (args.amount === 13 && failCharge) {
      failCharge = false;
      throw new Error('socket hang up'); // outcome unknown: in doubt on resume
    }
    return { amount: args.amount };
  }
}

@DurableWorkflow('pay', { maxAttempts: 3 })
class PayWorkflow {
  constructor(private readonly payments: Payments) {}
  async run(input: { amount: number }) {
    return this.payments.charge({ amount: input.amount });
  }
}

@DurableWorkflow('waiter')
class WaiterWorkflow {
  async run(_input: unknown, ctx: RunContext) {
    return { got: await ctx.waitForSignal('go') };
  }
}

/** `depth` levels of `{ a: ... }` (or `[...]`), built without recursion. */
function nested(depth: number, array = false): unknown {
  let v: unknown = 1;
  for (let i = 0; i < depth; i++) v = array ? [v] : { a: v };
  return v;
}

describe('input at the edges', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let api: string;
  let runs: RunRepository;
  let commands: CommandGateway;
  let waiting: string; // a run waiting for signal "go"
  let approval: { runId: string; key: string }; // a command awaiting approval
  let inDoubt: { runId: string; key: string }; // a command in doubt

  /** Row counts and a digest of every command row: equal before and after a refused call. */
  const snapshot = async () =>
    (
      await db.query(`select (select count(*) from ai_runs)::int as runs,
                             (select count(*) from ai_events)::int as events,
                             (select count(*) from ai_signals)::int as signals,
                             (select md5(coalesce(string_agg(c::text, ',' order by idempotency_key), ''))
                                from ai_commands c) as commands,
                             (select md5(coalesce(string_agg(r::text, ',' order by id), '')) from ai_runs r) as rows`)
    )[0];

  /** The call is refused with `code`, its message names `field`, and nothing changed. */
  const refused = async (call: () => Promise<unknown>, code: string, field: string) => {
    const before = await snapshot();
    const err = await call().then(
      () => new Error('resolved'),
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ code, message: expect.stringContaining(field) });
    expect(await snapshot()).toEqual(before);
  };

  const call = async (method: string, path: string, body?: unknown, raw?: string) => {
    const res = await fetch(`${api}${path}`, {
      method,
      headers: { 'content-type': 'application/json' },
      body: raw ?? (body === undefined ? undefined : JSON.stringify(body)),
    });
    const text = await res.text();
    let json: any = text;
    try {
      json = JSON.parse(text);
    } catch {
      /* not JSON */
    }
    return { status: res.status, body: json };
  };

  /** The HTTP call is a 400 with this code whose message names `field`, and nothing changed. */
  const badRequest = async (path: string, body: unknown, field: string, raw?: string) => {
    const before = await snapshot();
    const res = await call('POST', path, body, raw);
    expect(res).toMatchObject({ status: 400 });
    expect(JSON.stringify(res.body)).toContain(field);
    expect(await snapshot()).toEqual(before);
    return res;
  };

  beforeAll(async () => {
    db = await createTestDatabase('input_edges');
    const booted = await bootHttpApp(db.url, {
      imports: [DurableAdminModule.forRoot({ allowAnonymous: true, observability: false })],
      providers: [Payments, PayWorkflow, EchoWorkflow, OtherWorkflow, WaiterWorkflow],
    });
    app = booted.app;
    api = `${booted.http}/durable/api`;
    runs = app.get(RunRepository);
    commands = app.get(CommandGateway);

    waiting = (await runs.start('waiter', {})).run.id;
    await driveUntil(app, db, waiting, ['waiting']);
    const big = (await runs.start('pay', { amount: 500 })).run.id;
    await driveUntil(app, db, big, ['waiting']);
    approval = { runId: big, key: (await commands.listForRun(big))[0].idempotencyKey };
    const doubt = (await runs.start('pay', { amount: 13 })).run.id;
    const worker = app.get(DurableWorker);
    for (let i = 0; i < 10 && !(await runs.get(doubt))!.parkedReason?.includes('in doubt'); i++) {
      await db.query(`update ai_runs set available_at = now() where id = $1 and available_at < 'infinity'`, [
        doubt,
      ]);
      await worker.tick();
      await worker.idle();
    }
    inDoubt = {
      runId: doubt,
      key: (await commands.listForRun(doubt, { status: 'in_doubt' }))[0].idempotencyKey,
    };
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  describe('NUL and lone surrogates are typed errors naming the field; nothing is written', () => {
    const INVALID = 'DURABLE_INVALID_ARGUMENT';
    const NOT_JSON = 'DURABLE_NOT_SERIALIZABLE';
    it.each<[string, () => Promise<unknown>, string, string]>([
      ['start input (value)', () => runs.start('echo', { note: NUL }), NOT_JSON, '$.note'],
      ['start input (key)', () => runs.start('echo', { [LONE]: 1 }), NOT_JSON, 'input of run kind "echo"'],
      [
        'start idempotencyKey (NUL)',
        () => runs.start('echo', {}, { idempotencyKey: NUL }),
        INVALID,
        'idempotencyKey',
      ],
      [
        'start idempotencyKey (surrogate)',
        () => runs.start('echo', {}, { idempotencyKey: LONE }),
        INVALID,
        'idempotencyKey',
      ],
      ['signal name (NUL)', () => runs.signal(waiting, NUL), INVALID, 'name'],
      ['signal name (surrogate)', () => runs.signal(waiting, LONE), INVALID, 'name'],
      ['signal payload', () => runs.signal(waiting, 'go', { x: [LONE] }), NOT_JSON, '$.x[0]'],
      ['signal by', () => runs.signal(waiting, 'go', null, NUL), INVALID, 'by'],
      ['cancel reason (NUL)', () => runs.cancel(waiting, NUL), INVALID, 'reason'],
      ['cancel reason (surrogate)', () => runs.cancel(waiting, LONE), INVALID, 'reason'],
      ['cancel by', () => runs.cancel(waiting, 'ok', LONE), INVALID, 'by'],
      ['retry by', () => runs.retry(waiting, NUL), INVALID, 'by'],
      [
        'approve note',
        () => runs.approve(approval.runId, approval.key, { by: 'ops', note: NUL }),
        INVALID,
        'note',
      ],
      ['approve by', () => runs.approve(approval.runId, approval.key, { by: LONE }), INVALID, 'by'],
      ['approve key', () => runs.approve(approval.runId, NUL, { by: 'ops' }), INVALID, 'idempotencyKey'],
      [
        'reject note',
        () => runs.reject(approval.runId, approval.key, { by: 'ops', note: LONE }),
        INVALID,
        'note',
      ],
      ['reject by', () => runs.reject(approval.runId, approval.key, { by: NUL }), INVALID, 'by'],
      [
        'resolve result',
        () => runs.resolveCommand(inDoubt.key, { outcome: 'succeeded', result: { id: NUL } }),
        NOT_JSON,
        'resolution.result',
      ],
      [
        'resolve error',
        () => runs.resolveCommand(inDoubt.key, { outcome: 'failed', error: LONE }),
        INVALID,
        'resolution.error',
      ],
      ['resolve by', () => runs.resolveCommand(inDoubt.key, { outcome: 'retry' }, NUL), INVALID, 'by'],
      ['resolve key', () => runs.resolveCommand(NUL, { outcome: 'retry' }), INVALID, 'idempotencyKey'],
      ['list kind', () => runs.list({ kind: NUL }), INVALID, 'kind'],
    ])('%s', (_label, fn, code, field) => refused(fn, code, field));

    it('admin API: 400 naming the field, nothing written', async () => {
      await badRequest(`/runs/${waiting}/signal`, { name: NUL }, 'name');
      await badRequest(`/runs/${waiting}/signal`, { name: 'go', payload: { s: LONE } }, '$.s');
      await badRequest(`/runs/${waiting}/cancel`, { reason: LONE }, 'reason');
      await badRequest(`/runs/${approval.runId}/approve`, { key: approval.key, note: NUL }, 'note');
      await badRequest(`/runs/${approval.runId}/reject`, { key: approval.key, note: LONE }, 'note');
      await badRequest(`/runs/${approval.runId}/approve`, { key: NUL }, 'key');
      await badRequest(
        `/runs/${inDoubt.runId}/resolve`,
        { key: inDoubt.key, outcome: 'failed', error: NUL },
        'error',
      );
      await badRequest(
        `/runs/${inDoubt.runId}/resolve`,
        { key: inDoubt.key, outcome: 'succeeded', result: [LONE] },
        'resolution.result',
      );
      expect((await call('GET', `/runs?kind=${encodeURIComponent(NUL)}`)).status).toBe(400);
    });
  });

  describe('one idempotency key is one logical run', () => {
    it('a retry with the same input (any key order) returns the first run', async () => {
      const first = await runs.start('echo', { a: 1, b: [1, 2] }, { idempotencyKey: 'same-input' });
      const again = await runs.start('echo', { b: [1, 2], a: 1 }, { idempotencyKey: 'same-input' });
      expect(again).toMatchObject({ created: false, run: { id: first.run.id } });
    });

    it('a different input under the same key is an IdempotencyConflictError; nothing is written', async () => {
      const first = await runs.start('echo', { order: 'PO-1' }, { idempotencyKey: 'po-key' });
      await refused(
        () => runs.start('echo', { order: 'PO-2' }, { idempotencyKey: 'po-key' }),
        'DURABLE_IDEMPOTENCY_CONFLICT',
        'different input',
      );
      const err = await runs.start('echo', null, { idempotencyKey: 'po-key' }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(IdempotencyConflictError);
      expect(err).toMatchObject({ idempotencyKey: 'po-key', existingRunId: first.run.id });
      await refused(
        () => runs.start('other', { order: 'PO-1' }, { idempotencyKey: 'po-key' }),
        'DURABLE_IDEMPOTENCY_CONFLICT',
        'a run of another kind', // not which kind: that run may be another caller's
      );
    });
  });

  describe('out-of-range input is a typed error naming the field; nothing is written', () => {
    const INVALID = 'DURABLE_INVALID_ARGUMENT';
    const hugeKey = randomBytes(2000).toString('hex'); // 4,000 bytes that do not compress: above a btree row
    const cursor = (s: string) => Buffer.from(s).toString('base64url');
    it.each<[string, () => Promise<unknown>, string]>([
      [
        'idempotencyKey over 512 bytes',
        () => runs.start('echo', {}, { idempotencyKey: hugeKey }),
        'idempotencyKey',
      ],
      [
        'idempotencyKey of 257 two-byte chars',
        () => runs.start('echo', {}, { idempotencyKey: 'é'.repeat(257) }),
        '512',
      ],
      ['signal name over 512 bytes', () => runs.signal(waiting, hugeKey), 'name'],
      ['maxAttempts 2^40', () => runs.start('echo', {}, { maxAttempts: 2 ** 40 }), 'maxAttempts'],
      ['priority 2^40', () => runs.start('echo', {}, { priority: 2 ** 40 }), 'priority'],
      ['priority -2^40', () => runs.start('echo', {}, { priority: -(2 ** 40) }), 'priority'],
      [
        'runAt 200,000 years ago',
        () => runs.start('echo', {}, { runAt: new Date(Date.UTC(-200000, 0, 1)) }),
        'runAt',
      ],
      ['runAt year 20000', () => runs.start('echo', {}, { runAt: new Date(Date.UTC(20000, 0, 1)) }), 'runAt'],
      ['get', () => runs.get('not-a-uuid'), 'id'],
      ['events', () => runs.events('42'), 'id'],
      ['checkpoints', () => runs.checkpoints('x'), 'id'],
      ['cancel', () => runs.cancel('not-a-uuid'), 'id'],
      ['retry', () => runs.retry('not-a-uuid'), 'id'],
      ['signal', () => runs.signal('not-a-uuid', 'go'), 'id'],
      ['approve', () => runs.approve('------------------------------------', 'k', { by: 'ops' }), 'runId'],
      ['reject', () => runs.reject('not-a-uuid', 'k', { by: 'ops' }), 'runId'],
      ['listForRun', () => commands.listForRun('------------------------------------'), 'runId'],
      ['listForRun status', () => commands.listForRun(MISSING, { status: 'bogus' as 'pending' }), 'status'],
      [
        'cursor: year JS parses, PostgreSQL refuses',
        () => runs.list({ after: cursor(`+275760-09-13T00:00:00.000Z|${MISSING}`) }),
        'after',
      ],
      [
        'cursor: 30 February',
        () => runs.list({ after: cursor(`2020-02-30T00:00:00.000000Z|${MISSING}`) }),
        'after',
      ],
      [
        'cursor: not a uuid',
        () =>
          runs.list({ after: cursor('2020-01-01T00:00:00.000000Z|------------------------------------') }),
        'after',
      ],
    ])('%s', (_label, fn, field) => refused(fn, INVALID, field));

    it('an idempotency key of exactly 512 bytes is accepted', async () => {
      const key = 'é'.repeat(256);
      expect((await runs.start('echo', {}, { idempotencyKey: key })).run.idempotencyKey).toBe(key);
    });

    it('input, signal payloads and results nested 100,000 deep are SerializationErrors', async () => {
      const deep = nested(100_000);
      await refused(() => runs.start('echo', deep), 'DURABLE_NOT_SERIALIZABLE', 'nested deeper than 256');
      await refused(() => runs.signal(waiting, 'go', deep), 'DURABLE_NOT_SERIALIZABLE', 'nested deeper');
      await refused(
        () => runs.resolveCommand(inDoubt.key, { outcome: 'succeeded', result: nested(100_000, true) }),
        'DURABLE_NOT_SERIALIZABLE',
        'resolution.result',
      );
    });

    it('admin API: bad cursors, dates and bodies nested 2,000 deep are 400s', async () => {
      const badCursor = cursor(`+275760-09-13T00:00:00.000Z|${MISSING}`);
      expect((await call('GET', `/runs?after=${badCursor}`)).status).toBe(400);
      expect((await call('GET', `/runs?createdFrom=-200000-01-01T00:00:00Z`)).status).toBe(400);
      const deepArray = '['.repeat(2000) + ']'.repeat(2000);
      await badRequest(
        `/runs/${waiting}/signal`,
        undefined,
        'payload',
        `{"name":"go","payload":${deepArray}}`,
      );
      await badRequest(`/runs/${waiting}/cancel`, undefined, 'reason', `{"reason":${deepArray}}`);
      const deepObject = JSON.stringify(nested(2000));
      await badRequest(
        `/runs/${inDoubt.runId}/resolve`,
        undefined,
        'result',
        `{"key":${JSON.stringify(inDoubt.key)},"outcome":"succeeded","result":${deepObject}}`,
      );
    });
  });

  describe('admin bodies arrive byte for byte', () => {
    const payload = { constructor: 1, toString: 'x', nested: { constructor: { a: 1 } } };

    it('keeps keys such as constructor in a signal payload', async () => {
      const { run } = await runs.start('waiter', {});
      await driveUntil(app, db, run.id, ['waiting']);
      const res = await call('POST', `/runs/${run.id}/signal`, { name: 'go', payload });
      expect(res.status).toBe(200);
      const [row] = await db.query(`select payload = $2::jsonb as same from ai_signals where run_id = $1`, [
        run.id,
        JSON.stringify(payload),
      ]);
      expect(row.same).toBe(true);
      expect((await driveUntil(app, db, run.id)).output).toEqual({ got: payload });
    });

    it("keeps keys such as constructor in an operator's recorded result", async () => {
      const res = await call('POST', `/runs/${inDoubt.runId}/resolve`, {
        key: inDoubt.key,
        outcome: 'succeeded',
        result: payload,
      });
      expect(res.status).toBe(200);
      const [row] = await db.query(
        `select result = $2::jsonb as same from ai_commands where idempotency_key = $1`,
        [inDoubt.key, JSON.stringify(payload)],
      );
      expect(row.same).toBe(true);
    });
  });
});
