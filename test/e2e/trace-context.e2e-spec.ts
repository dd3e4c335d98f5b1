import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Controller, Headers, INestApplication, Injectable, Post } from '@nestjs/common';
import { context, ROOT_CONTEXT, trace } from '@opentelemetry/api';
import { DurableStep, DurableWorkflow, RunRepository } from '../../src';
import { DurableAdminModule } from '../../src/admin';
import { bootHttpApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil } from '../helpers/drive';
import { spawnWorker, waitFor } from '../helpers/processes';
import { prepareWorkerSchema } from '../helpers/schema';
import { installContextManager, installSpanRecorder } from '../helpers/span-recorder';
import { parseTraceparent } from '../../src/util/trace-context';

/**
 * Issue 20, item 6: the `durable.run` span joins the trace of the request that started the run. The W3C
 * trace context active at `start()` is stored (in `run.created`) and is the parent of every attempt's
 * span, whichever process claims it (here the claim runs outside the request's context: what links them
 * is the stored value, not memory). A run started outside any span is a root of its own.
 */
const recorder = installSpanRecorder();
installContextManager();

@Injectable()
class Steps {
  @DurableStep({ name: 'work' })
  async work() {
    return 1;
  }
}

@DurableWorkflow('traced')
class TracedWorkflow {
  constructor(private readonly steps: Steps) {}
  async run() {
    return this.steps.work();
  }
}

/**
 * An API endpoint as an OTel SDK's HTTP instrumentation runs it: the request's `traceparent` header is
 * the active context while the handler runs (extracted here by hand: the test installs no SDK).
 */
@Controller('orders')
class OrdersController {
  constructor(private readonly runs: RunRepository) {}
  @Post()
  async create(@Headers('traceparent') header: string) {
    const remote = parseTraceparent(header);
    const ctx = remote ? trace.setSpanContext(ROOT_CONTEXT, remote) : ROOT_CONTEXT;
    const { run } = await context.with(ctx, () => this.runs.start('po9', {}));
    return { id: run.id };
  }
}

describe('trace context: request → run → steps', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let runs: RunRepository;
  let api: string;

  beforeAll(async () => {
    db = await createTestDatabase('trace_context');
    let http: string;
    ({ app, http } = await bootHttpApp(db.url, {
      imports: [DurableAdminModule.forRoot({ allowAnonymous: true, observability: { metrics: false } })],
      providers: [Steps, TracedWorkflow],
      controllers: [OrdersController],
      logger: [],
    }));
    api = http;
    runs = app.get(RunRepository);
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('a run started inside a request span runs under it; its step under the run', async () => {
    const request = recorder.startSpan('POST /orders', {}, ROOT_CONTEXT);
    const { run } = await context.with(trace.setSpan(ROOT_CONTEXT, request), () => runs.start('traced', {}));
    request.end();
    const req = request.spanContext();
    const created = (await runs.events(run.id)).find((e) => e.type === 'run.created')!;
    expect(created.payload.traceparent).toBe(`00-${req.traceId}-${req.spanId}-01`);
    expect(trace.getSpanContext(context.active())).toBeUndefined(); // the worker ticks outside the request
    expect((await driveUntil(app, db, run.id)).status).toBe('succeeded');
    const attempt = recorder.spans.find((s) => s.name === 'durable.run traced')!;
    expect(attempt.ctx.traceId).toBe(req.traceId);
    expect(attempt.parentSpanId).toBe(req.spanId);
    const step = recorder.spans.find((s) => s.name === 'durable.step work')!;
    expect(step.ctx.traceId).toBe(req.traceId);
    expect(step.parentSpanId).toBe(attempt.ctx.spanId);
  });

  it('a run started outside any span is a root; a bad stored traceparent is ignored, never fatal', async () => {
    recorder.spans = [];
    const { run } = await runs.start('traced', {});
    expect((await runs.events(run.id)).find((e) => e.type === 'run.created')!.payload).not.toHaveProperty(
      'traceparent',
    );
    const { run: forged } = await runs.start('traced', { forged: true });
    await db.query(
      `update ai_events set payload = payload || '{"traceparent":"00-zz-not-a-trace-00"}' where run_id = $1`,
      [forged.id],
    );
    expect((await driveUntil(app, db, run.id)).status).toBe('succeeded');
    expect((await driveUntil(app, db, forged.id)).status).toBe('succeeded');
    const roots = recorder.spans.filter((s) => s.name === 'durable.run traced');
    expect(roots).toHaveLength(2);
    for (const r of roots) expect(r.parentSpanId).toBeUndefined();
  });

  it('one trace id from the HTTP request, through start() in the API process, to the spans of a worker process', async () => {
    await prepareWorkerSchema(db.url).catch(() => undefined); // migrations ran at boot; step_effects is new
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const requestSpan = '00f067aa0ba902b7';
    const res = await fetch(`${api}/orders`, {
      method: 'POST',
      headers: { traceparent: `00-${traceId}-${requestSpan}-01` },
    });
    expect(res.status).toBe(201);
    const { id } = (await res.json()) as { id: string };
    const file = join(mkdtempSync(join(tmpdir(), 'dx-trace-')), 'spans.json');
    const worker = spawnWorker({ DB_URL: db.url, TRACE_FILE: file });
    try {
      await worker.ready;
      await waitFor(async () => (await runs.get(id))?.status === 'succeeded', 30_000, 'the run to succeed');
    } finally {
      worker.child.kill('SIGTERM');
      await worker.exited;
    }
    const spans = JSON.parse(readFileSync(file, 'utf8')) as Array<{
      name: string;
      traceId: string;
      spanId: string;
      parentSpanId?: string;
    }>;
    const attempt = spans.find((s) => s.name === 'durable.run po9')!;
    expect(attempt).toMatchObject({ traceId, parentSpanId: requestSpan });
    const steps = spans.filter((s) => s.name.startsWith('durable.step '));
    expect(steps.length).toBe(9);
    for (const s of steps) expect(s).toMatchObject({ traceId, parentSpanId: attempt.spanId });
  });
});
