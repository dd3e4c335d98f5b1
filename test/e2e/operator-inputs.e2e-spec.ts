import { Body, Controller, INestApplication, Post } from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';
import {
  DurableExceptionFilter,
  DurableExecutionModule,
  DurableWorkflow,
  IdempotencyConflictError,
  InvalidArgumentError,
  InvalidOptionsError,
  RunRepository,
  UnknownRunKindError,
} from '../../src';
import { bootApp, bootError, bootHttpApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';

/**
 * Issue 20, item 8 (what an operator or a caller can send): a kind that can never be stored or logged
 * safely is a 400 before anything is looked up or written, an idempotency conflict names nobody else's
 * run, and a system schema is not accepted as `database.schema`.
 */

@DurableWorkflow('known-kind')
class KnownWorkflow {
  async run(input: unknown) {
    return input;
  }
}

/** An app's endpoint that passes the caller's kind through, as a generic "start a run" API would. */
@Controller('start')
class StartController {
  constructor(private readonly runs: RunRepository) {}
  @Post()
  async start(@Body() body: { kind: string; input?: unknown; key?: string }) {
    const { run } = await this.runs.start(
      body.kind,
      body.input ?? {},
      body.key ? { idempotencyKey: body.key } : {},
    );
    return { id: run.id };
  }
}

describe('what callers send: kinds, keys, schemas', () => {
  let db: TestDatabase;
  let worker: { app: INestApplication; http: string };
  let producer: INestApplication;
  const count = async () => Number((await db.query(`select count(*) as n from ai_runs`))[0].n);

  beforeAll(async () => {
    db = await createTestDatabase('operator_inputs');
    worker = await bootHttpApp(db.url, {
      options: { worker: { enabled: true, pollIntervalMs: 60_000 } },
      providers: [KnownWorkflow, { provide: APP_FILTER, useClass: DurableExceptionFilter }],
      controllers: [StartController],
    });
    producer = await bootApp(db.url, []); // worker.enabled false: starts kinds it does not register
  });
  afterAll(async () => {
    await producer?.close();
    await worker?.app.close();
    await db?.drop();
  });

  it('a kind that can never be stored or logged safely is an InvalidArgumentError, in a producer and in a worker, and nothing is written', async () => {
    const before = await count();
    const bad: Array<[unknown, RegExp]> = [
      ['k'.repeat(201), /kind must be at most 200 characters, got 201/],
      ['x'.repeat(50_000), /kind must be at most 200 characters, got 50000/],
      ['two\nlines', /kind must not contain control characters/],
      ['nul\u0000kind', /kind/],
      [null, /kind is required/],
      ['', /kind must be a non-empty string/],
    ];
    for (const app of [producer, worker.app]) {
      for (const [kind, why] of bad) {
        const err = await app
          .get(RunRepository)
          .start(kind as string, { card: '4242' })
          .catch((e) => e);
        expect(err).toBeInstanceOf(InvalidArgumentError);
        expect((err as Error).message).toMatch(why);
        expect((err as Error).message.length).toBeLessThan(400); // a 50 KB kind is never echoed
      }
    }
    expect(await count()).toBe(before);
  });

  it('over HTTP: a 400 with the reason, never a 500 or a line of the caller forged into the log', async () => {
    const post = (body: unknown) =>
      fetch(`${worker.http}/start`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    for (const kind of ['k'.repeat(5000), 'evil\n[Nest] forged line', 'nul\u0000']) {
      const res = await post({ kind });
      expect(res.status).toBe(400);
      expect(((await res.json()) as { code: string }).code).toBe('DURABLE_INVALID_ARGUMENT');
    }
    // A well-formed kind this worker does not register: a 400 naming it quoted and cut short.
    const unknown = await post({ kind: `no-such-kind-${'y'.repeat(150)}` });
    expect(unknown.status).toBe(400);
    const body = (await unknown.json()) as { code: string; message: string };
    expect(body.code).toBe('DURABLE_UNKNOWN_RUN_KIND');
    expect(body.message).toContain('"no-such-kind-yyy');
    expect(body.message).not.toContain('y'.repeat(100));
    const err = await worker.app
      .get(RunRepository)
      .start('not-registered', {})
      .catch((e) => e);
    expect(err).toBeInstanceOf(UnknownRunKindError);
  });

  it("an idempotency conflict names neither the other caller's run nor its kind", async () => {
    const runs = producer.get(RunRepository);
    const first = await runs.start('known-kind', { order: 1 }, { idempotencyKey: 'order-77' });
    for (const [kind, input] of [
      ['known-kind', { order: 2 }],
      ['other-kind', { order: 1 }],
    ] as const) {
      const err = await runs.start(kind, input, { idempotencyKey: 'order-77' }).catch((e) => e);
      expect(err).toBeInstanceOf(IdempotencyConflictError);
      expect((err as Error).message).toContain('"order-77"');
      expect((err as Error).message).not.toContain(first.run.id);
      expect((err as Error).message).not.toContain('known-kind');
      expect((err as IdempotencyConflictError).existingRunId).toBe(first.run.id); // for the app's own code
    }
  });

  it('information_schema is not a schema for the module', async () => {
    const err = await bootError({
      imports: [DurableExecutionModule.forRoot({ database: { url: db.url, schema: 'information_schema' } })],
    });
    expect(err).toBeInstanceOf(InvalidOptionsError);
    expect((err as Error).message).toContain('not information_schema');
  });
});
