import { INestApplication, Injectable } from '@nestjs/common';
import { context, ROOT_CONTEXT, trace } from '@opentelemetry/api';
import { DurableAdminModule, DurableStep, DurableWorkflow, RunRepository } from '../../src';
import { bootHttpApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil } from '../helpers/drive';
import { installContextManager, installSpanRecorder } from '../helpers/span-recorder';

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

describe('trace context: request → run → steps', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let runs: RunRepository;

  beforeAll(async () => {
    db = await createTestDatabase('trace_context');
    ({ app } = await bootHttpApp(db.url, {
      imports: [DurableAdminModule.forRoot({ allowAnonymous: true, observability: { metrics: false } })],
      providers: [Steps, TracedWorkflow],
      logger: [],
    }));
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
});
