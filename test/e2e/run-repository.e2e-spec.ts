import { INestApplication } from '@nestjs/common';
import {
  DurableWorkflow,
  IdempotencyConflictError,
  InvalidArgumentError,
  InvalidRunStateError,
  PayloadTooLargeError,
  RunNotFoundError,
  RunRepository,
  SerializationError,
  UnknownRunKindError,
} from '../../src';
import { EchoWorkflow, OtherWorkflow } from '../fixtures/echo-workflows';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';

/** The only kind the worker-enabled app registers: it claims none of the runs the other tests look at. */
@DurableWorkflow('worker-only')
class WorkerOnlyWorkflow {
  async run() {
    return null;
  }
}

@DurableWorkflow('typed')
class TypedWorkflow {
  async run(input: { orderRef: string; lines: number }) {
    return { orderRef: input.orderRef, total: input.lines * 2 };
  }
}

class NotAWorkflow {
  async run(input: { a: number }) {
    return input;
  }
}

describe('RunRepository', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let runs: RunRepository;

  beforeAll(async () => {
    db = await createTestDatabase('runs');
    app = await bootApp(db.url, [EchoWorkflow, OtherWorkflow], {
      limits: { maxInputBytes: 10_000 },
      database: { poolSize: 25 },
    });
    runs = app.get(RunRepository);
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('starts a run of a workflow class by its kind, typed from run() (producers need not register it)', async () => {
    const { run, created } = await runs.start(TypedWorkflow, { orderRef: 'PO-1', lines: 3 });
    expect(created).toBe(true);
    expect(run.kind).toBe('typed');
    const input: { orderRef: string; lines: number } = run.input;
    expect(input).toEqual({ orderRef: 'PO-1', lines: 3 });
    const output: { orderRef: string; total: number } | null = run.output;
    expect(output).toBeNull();
    // @ts-expect-error the input type comes from TypedWorkflow.run()
    await expect(runs.start(TypedWorkflow, { orderRef: 'PO-2' })).resolves.toBeDefined();
    await expect(runs.start(NotAWorkflow, { a: 1 })).rejects.toMatchObject({ code: 'DURABLE_MISUSE' });
  });

  it('starts a run with a run.created event', async () => {
    const { run, created } = await runs.start('echo', { order: 'PO-1' });
    expect(created).toBe(true);
    expect(run).toMatchObject({
      kind: 'echo',
      status: 'pending',
      input: { order: 'PO-1' },
      epoch: 0,
      attempts: 0,
    });
    expect((await runs.get(run.id))?.id).toBe(run.id);
    expect((await runs.events(run.id)).map((e) => e.type)).toEqual(['run.created']);
  });

  it('20 concurrent starts with one idempotency key make exactly one run', async () => {
    const results = await Promise.all(
      Array.from({ length: 20 }, () => runs.start('echo', { n: 1 }, { idempotencyKey: 'order-20' })),
    );
    const ids = new Set(results.map((r) => r.run.id));
    expect(ids.size).toBe(1);
    expect(results.filter((r) => r.created)).toHaveLength(1);
    const rows = await db.query(`select count(*)::int as n from ai_runs where idempotency_key = 'order-20'`);
    expect(rows[0].n).toBe(1);
    const events = await db.query(`select count(*)::int as n from ai_events where run_id = $1`, [
      [...ids][0],
    ]);
    expect(events[0].n).toBe(1);
  });

  it('refuses an idempotency key owned by another kind', async () => {
    await runs.start('echo', {}, { idempotencyKey: 'shared-key' });
    await expect(runs.start('other', {}, { idempotencyKey: 'shared-key' })).rejects.toBeInstanceOf(
      IdempotencyConflictError,
    );
  });

  it('a process running a worker refuses a kind it does not register, writing nothing', async () => {
    const worker = await bootApp(db.url, [WorkerOnlyWorkflow], {
      worker: { enabled: true, pollIntervalMs: 60_000 },
    });
    try {
      const before = (await db.query(`select count(*)::int as n from ai_runs`))[0].n;
      const call = () => worker.get(RunRepository).start('nope', {});
      await expect(call()).rejects.toBeInstanceOf(UnknownRunKindError);
      await expect(call()).rejects.toMatchObject({ code: 'DURABLE_UNKNOWN_RUN_KIND' });
      expect((await db.query(`select count(*)::int as n from ai_runs`))[0].n).toBe(before);
    } finally {
      await worker.close();
    }
  });

  describe('bad input writes nothing', () => {
    const circular: Record<string, unknown> = {};
    circular.me = circular;
    it.each([
      ['BigInt', () => runs.start('echo', { n: 1n }), SerializationError, 'DURABLE_NOT_SERIALIZABLE'],
      ['circular', () => runs.start('echo', circular), SerializationError, 'DURABLE_NOT_SERIALIZABLE'],
      ['function', () => runs.start('echo', { f: () => 1 }), SerializationError, 'DURABLE_NOT_SERIALIZABLE'],
      [
        'oversized',
        () => runs.start('echo', { s: 'x'.repeat(20_000) }),
        PayloadTooLargeError,
        'DURABLE_PAYLOAD_TOO_LARGE',
      ],
      [
        'maxAttempts',
        () => runs.start('echo', {}, { maxAttempts: 0 }),
        InvalidArgumentError,
        'DURABLE_INVALID_ARGUMENT',
      ],
    ])('%s', async (_label, call, type, code) => {
      const before = (await db.query(`select count(*)::int as n from ai_runs`))[0].n;
      await expect(call()).rejects.toBeInstanceOf(type);
      await expect(call()).rejects.toMatchObject({ code });
      expect((await db.query(`select count(*)::int as n from ai_runs`))[0].n).toBe(before);
    });
  });

  it('lists with filters and keyset pagination, no duplicates or gaps', async () => {
    for (let i = 0; i < 7; i++) await runs.start('other', { i });
    const seen: string[] = [];
    let after: string | undefined;
    do {
      const page = await runs.list({ kind: 'other', limit: 3, after });
      expect(page.items.length).toBeLessThanOrEqual(3);
      seen.push(...page.items.map((r) => r.id));
      after = page.next;
    } while (after);
    const all = await db.query(
      `select id from ai_runs where kind = 'other' order by created_at desc, id desc`,
    );
    expect(seen).toEqual(all.map((r) => r.id));
    expect((await runs.list({ status: 'succeeded' })).items).toHaveLength(0);
    await expect(runs.list({ limit: 0 })).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(runs.list({ after: 'garbage' })).rejects.toThrow(/after/);
  });

  it('cancels a pending run at once and refuses to cancel it twice', async () => {
    const { run } = await runs.start('echo', {});
    const cancelled = await runs.cancel(run.id, 'customer withdrew');
    expect(cancelled).toMatchObject({ status: 'cancelled', cancelReason: 'customer withdrew' });
    expect((await runs.events(run.id)).map((e) => e.type)).toEqual(['run.created', 'run.cancelled']);
    await expect(runs.cancel(run.id)).rejects.toBeInstanceOf(InvalidRunStateError);
    await expect(runs.cancel('00000000-0000-4000-8000-000000000000')).rejects.toBeInstanceOf(
      RunNotFoundError,
    );
  });

  it('records a cancel request on a running run without ending it', async () => {
    const { run } = await runs.start('echo', {});
    await db.query(
      `update ai_runs set status = 'running', worker_id = 'w', lease_expires_at = now() + interval '1 minute' where id = $1`,
      [run.id],
    );
    const after = await runs.cancel(run.id, 'stop');
    expect(after.status).toBe('running');
    expect(after.cancelRequestedAt).toBeInstanceOf(Date);
    expect((await runs.events(run.id)).map((e) => e.type)).toContain('run.cancel_requested');
  });
});
