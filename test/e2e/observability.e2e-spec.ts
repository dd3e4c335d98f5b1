import { INestApplication, Injectable, Type } from '@nestjs/common';
import {
  CommandContext,
  DurableExecutionModuleOptions,
  DurableStep,
  DurableWorkflow,
  IdempotentCommand,
  RunRepository,
} from '../../src';
import { DurableAdminModule } from '../../src/admin';
import { DurableObservabilityOptions, DurableObservers } from '../../src/observability';
import { bootApp, bootHttpApp } from '../helpers/app';
import { DurableWorker } from '../../src/engine/worker.service';
import { Reconciler } from '../../src/maintenance/reconciler.service';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { installSpanRecorder } from '../helpers/span-recorder';
import { driveUntil, gate } from '../helpers/drive';

const recorder = installSpanRecorder();

let hold: ReturnType<typeof gate> | null = null;
let entered: ReturnType<typeof gate> | null = null;
let failCharge = true;

@Injectable()
class Steps {
  @DurableStep({ name: 'plan', kind: 'model' })
  async plan() {
    return { usage: { prompt_tokens: 10, completion_tokens: 2 } };
  }
  @DurableStep({ name: 'fetch', kind: 'tool' })
  async fetch() {
    entered?.open();
    await hold?.promise;
    return 'data';
  }
  @DurableStep({ name: 'sum' })
  async sum() {
    return 42;
  }
  @IdempotentCommand({ name: 'charge', inDoubt: 'manual' })
  async charge(_args: { amount: number }, _ctx?: CommandContext) {
    if (failCharge) throw new Error('socket hang up');
    return 'charged';
  }
}

@DurableWorkflow('triple')
class Triple {
  constructor(private readonly s: Steps) {}
  async run() {
    await this.s.plan();
    await this.s.fetch();
    return this.s.sum();
  }
}

@DurableWorkflow('pay')
class Pay {
  constructor(private readonly s: Steps) {}
  async run() {
    return this.s.charge({ amount: 1 });
  }
}

const SPAN_SECRET = 'sk_live_SPAN_SECRET_77';

@Injectable()
class LeakySteps {
  @DurableStep({ name: 'leak', retry: { maxAttempts: 1 } })
  async leak(): Promise<never> {
    throw Object.assign(new Error(`card declined for ${SPAN_SECRET}`), {
      retryable: false,
      code: 'E_DECLINED',
    });
  }
}

@DurableWorkflow('leaky', { maxAttempts: 1 })
class Leaky {
  constructor(private readonly s: LeakySteps) {}
  async run() {
    return this.s.leak();
  }
}

const providers: Type<unknown>[] = [Steps, Triple, Pay, LeakySteps, Leaky];

const boot = (
  url: string,
  worker: DurableExecutionModuleOptions['worker'],
  observability: DurableObservabilityOptions,
) =>
  bootHttpApp(url, {
    options: { worker },
    imports: [DurableAdminModule.forRoot({ allowAnonymous: true, observability })],
    providers,
    logger: [],
  });

/** The value of one sample in Prometheus text, matched by name and (a subset of) labels. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const got = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => got[k] === v)) return Number(m[3]);
  }
  return undefined;
}

describe('observability: metrics, traces, health', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let http: string;
  let runs: RunRepository;
  const metrics = async () => (await fetch(`${http}/metrics`)).text();
  const health = async () => {
    const res = await fetch(`${http}/durable/health`);
    return { status: res.status, body: (await res.json()) as any };
  };

  beforeAll(async () => {
    db = await createTestDatabase('observability');
    ({ app, http } = await boot(
      db.url,
      { enabled: false },
      {
        metrics: { snapshotTtlMs: 0 },
        health: { maxBacklogAgeMs: 60_000 },
      },
    ));
    runs = app.get(RunRepository);
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('costs nothing when not imported: no observer is registered', async () => {
    const plain = await bootApp(db.url, providers);
    try {
      expect(plain.get(DurableObservers).active).toBe(false);
    } finally {
      await plain.close();
    }
    expect(app.get(DurableObservers).active).toBe(true);
  });

  it('counts runs, claims, attempts and step latencies, and records a span per attempt and per step', async () => {
    recorder.spans = [];
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await runs.start('triple', {})).run.id);
    for (const id of ids) expect((await driveUntil(app, db, id)).status).toBe('succeeded');
    const text = await metrics();
    expect(sample(text, 'durable_runs', { status: 'succeeded' })).toBe(3);
    expect(sample(text, 'durable_runs', { status: 'pending' })).toBe(0);
    expect(sample(text, 'durable_runs_claimed_total', { workflow: 'triple' })).toBe(3);
    expect(sample(text, 'durable_run_attempts_total', { workflow: 'triple', outcome: 'succeeded' })).toBe(3);
    for (const [step, kind] of [
      ['plan', 'model'],
      ['fetch', 'tool'],
      ['sum', 'compute'],
    ]) {
      const labels = { workflow: 'triple', step, step_kind: kind, outcome: 'committed' };
      expect(sample(text, 'durable_step_duration_seconds_count', labels)).toBe(3);
    }
    expect(sample(text, 'durable_worker_in_flight')).toBe(0);

    const runSpans = recorder.spans.filter((s) => s.name === 'durable.run triple');
    expect(runSpans).toHaveLength(3);
    expect(runSpans.map((s) => s.attributes['durable.run_id']).sort()).toEqual([...ids].sort());
    for (const run of runSpans) {
      expect(run).toMatchObject({
        ended: true,
        attributes: { 'durable.epoch': 1, 'durable.outcome': 'succeeded' },
      });
      const steps = recorder.spans.filter((s) => s.parentSpanId === run.ctx.spanId);
      expect(steps.map((s) => s.name)).toEqual([
        'durable.step plan',
        'durable.step fetch',
        'durable.step sum',
      ]);
      expect(steps.every((s) => s.ended && s.ctx.traceId === run.ctx.traceId)).toBe(true);
      expect(steps[0].attributes).toMatchObject({ 'durable.step.kind': 'model', 'durable.step.index': 0 });
    }
  });

  it('counts a lease lost to the reconciler and the takeover, with spans for both attempts', async () => {
    recorder.spans = [];
    const { run } = await runs.start('triple', {});
    hold = gate();
    entered = gate();
    const worker = app.get(DurableWorker);
    try {
      await worker.tick();
      await entered.promise; // the fetch step is running, held open
      await db.query(`update ai_runs set lease_expires_at = now() - interval '1 second' where id = $1`, [
        run.id,
      ]);
      expect(await app.get(Reconciler).sweep()).toEqual({ requeued: 1, deadLettered: 0 });
    } finally {
      hold.open();
      await worker.idle(); // its commit finds the epoch moved on: LeaseLostError
      hold = entered = null;
    }
    expect((await driveUntil(app, db, run.id)).status).toBe('succeeded');
    const text = await metrics();
    expect(sample(text, 'durable_lease_losses_total', { workflow: 'triple' })).toBe(1);
    expect(sample(text, 'durable_reconciler_actions_total', { action: 'requeued' })).toBe(1);
    expect(sample(text, 'durable_run_attempts_total', { workflow: 'triple', outcome: 'lease_lost' })).toBe(1);
    const attempts = recorder.spans.filter((s) => s.name === 'durable.run triple');
    expect(attempts.map((s) => [s.attributes['durable.epoch'], s.attributes['durable.outcome']])).toEqual([
      [1, 'lease_lost'],
      [2, 'succeeded'],
    ]);
    expect(attempts[0].status.code).toBe(2); // ERROR
    const cut = recorder.spans.find(
      (s) => s.name === 'durable.step fetch' && s.parentSpanId === attempts[0].ctx.spanId,
    );
    expect(cut?.attributes['durable.outcome']).toBe('failed');
  });

  it('reports in-doubt commands, the due backlog and its age', async () => {
    const { run } = await runs.start('pay', {});
    const worker = app.get(DurableWorker);
    for (let i = 0; i < 5 && !(await runs.get(run.id))!.parkedReason?.includes('in doubt'); i++) {
      await db.query(`update ai_runs set available_at = now() where id = $1 and available_at < 'infinity'`, [
        run.id,
      ]);
      await worker.tick();
      await worker.idle();
    }
    const due = [(await runs.start('triple', {})).run.id, (await runs.start('triple', {})).run.id];
    await db.query(`update ai_runs set available_at = now() - interval '90 seconds' where id = any($1)`, [
      due,
    ]);
    const text = await metrics();
    expect(sample(text, 'durable_commands_in_doubt')).toBe(1);
    expect(sample(text, 'durable_queue_depth')).toBe(2);
    // No worker of this app is on its schedule (ticks are driven): no presence row serves 'triple'.
    expect(sample(text, 'durable_runs_due_without_worker', { workflow: 'triple' })).toBe(2);
    expect(sample(text, 'durable_queue_oldest_due_age_seconds')).toBeGreaterThanOrEqual(90);
    // The call threw 'socket hang up' (the charge may have happened): in doubt at once, and its policy
    // (manual) parks the run in that same claim, before the workflow sees anything (issue 19 item 4).
    expect(sample(text, 'durable_step_duration_seconds_count', { step: 'charge', outcome: 'parked' })).toBe(
      1,
    );
    expect(text).not.toMatch(/durable_step_duration_seconds_count\{[^}]*step="charge"[^}]*outcome="failed"/);

    // Health: the backlog is older than its 60 s bound → 503 naming it; drained → 200.
    const down = await health();
    expect(down.status).toBe(503);
    expect(down.body.error.backlog).toMatchObject({ status: 'down', queueDepth: 2, maxAgeMs: 60_000 });
    expect(down.body.info).toMatchObject({
      database: { status: 'up' },
      worker: { status: 'up', enabled: false },
    });
    for (const id of due) await driveUntil(app, db, id);
    const up = await health();
    expect(up.status).toBe(200);
    expect(up.body.status).toBe('ok');
    expect(Object.keys(up.body.info).sort()).toEqual(['backlog', 'database', 'replication', 'worker']);
    expect(up.body.info.replication).toEqual({ status: 'up', mode: 'single', warnings: 0 });
    failCharge = false;
  });

  it('health: the worker check goes down when its loop stops claiming, the database check when it is gone', async () => {
    const other = await createTestDatabase('observability_b');
    const b = await boot(
      other.url,
      { enabled: true, pollIntervalMs: 50 },
      {
        metrics: false,
        health: { workerStaleAfterMs: 1500, databaseTimeoutMs: 1000 },
      },
    );
    const check = async () => {
      const res = await fetch(`${b.http}/durable/health`);
      return { status: res.status, body: (await res.json()) as any };
    };
    try {
      await new Promise((r) => setTimeout(r, 150));
      const first = await check();
      expect(first.status).toBe(200);
      expect(first.body.info.worker).toMatchObject({ status: 'up', staleAfterMs: 1500 });
      expect(await (await fetch(`${b.http}/metrics`)).status).toBe(404); // metrics: false

      await b.app.get(DurableWorker).beforeApplicationShutdown(); // drained: no more claim rounds
      await new Promise((r) => setTimeout(r, 1800));
      const stale = await check();
      expect(stale.status).toBe(503);
      expect(stale.body.error.worker.status).toBe('down');

      await other.drop(); // the database is gone (connections terminated)
      const gone = await check();
      expect(gone.status).toBe(503);
      expect(gone.body.error.database.status).toBe('down');
    } finally {
      await b.app.close();
      await other.drop();
    }
  });

  it("a failed step's span carries its error through the redact hook, with no stack", async () => {
    const hooked = await bootHttpApp(db.url, {
      options: {
        worker: { enabled: false },
        redact: (key, value) =>
          key === 'run.error'
            ? { ...value, message: String(value.message).replace(SPAN_SECRET, '[hidden]') }
            : value,
      },
      imports: [DurableAdminModule.forRoot({ allowAnonymous: true, observability: { metrics: false } })],
      providers,
      logger: [],
    });
    try {
      recorder.spans = [];
      const { run } = await hooked.app.get(RunRepository).start('leaky', {});
      expect((await driveUntil(hooked.app, db, run.id)).status).toBe('failed');
      const step = recorder.spans.find((s) => s.name === 'durable.step leak')!;
      expect(step.status).toMatchObject({ message: 'card declined for [hidden]' });
      expect(step.exceptions).toEqual([
        { name: 'Error', message: 'card declined for [hidden]', code: 'E_DECLINED' },
      ]);
      expect(JSON.stringify(recorder.spans.map((s) => [s.attributes, s.status, s.exceptions]))).not.toContain(
        SPAN_SECRET,
      );
    } finally {
      await hooked.app.close();
    }
  });
});
