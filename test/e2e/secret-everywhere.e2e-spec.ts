import {
  Controller,
  Get,
  INestApplication,
  Injectable,
  LoggerService,
  Param,
  UseFilters,
} from '@nestjs/common';
import {
  DurableExceptionFilter,
  DurableStep,
  DurableWorkflow,
  IdempotentCommand,
  RedactHook,
  RunRepository,
} from '../../src';
import { DurableAdminModule } from '../../src/admin';
import { bootHttpApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil } from '../helpers/drive';
import { installSpanRecorder } from '../helpers/span-recorder';

/**
 * Issue 20, item 8: one secret, every surface at once. A run's input carries a secret that reaches a
 * step's error, a command's args and error, the run's error and its parked reason. With the `redact`
 * hook and `logRunData: true` (the most the module ever logs), the secret is in no log line (any level),
 * no span (name, attributes, status, recorded exception), no metric, no health answer, no error reply of
 * DurableExceptionFilter (a failed result 422, a timed-out result 202, a signal too late 409), no admin API
 * response and no inspector page. The same app without the hook shows it in logs and spans, so the
 * check can fail.
 */
const SECRET = 'sk_live_EVERYWHERE_9191';
const recorder = installSpanRecorder();

const redact: RedactHook = (_key, value) =>
  JSON.parse(
    JSON.stringify(value ?? null)
      .split(SECRET)
      .join('[hidden]'),
  ) as unknown;

@Injectable()
class VaultSteps {
  @DurableStep({ name: 'lookup', kind: 'tool', retry: { maxAttempts: 1 } })
  async lookup(secret: string): Promise<never> {
    throw Object.assign(new Error(`vault refused ${secret}`), { retryable: false });
  }

  /** A plain error from the target: the outcome is unknown, the run is held for an operator. */
  @IdempotentCommand({ name: 'wire', inDoubt: 'manual' })
  async wire(args: { note: string }): Promise<string> {
    throw new Error(`socket hang up near ${args.note}`);
  }
}

@DurableWorkflow('vault-held')
class HeldWorkflow {
  constructor(private readonly steps: VaultSteps) {}
  async run(input: { secret: string }) {
    try {
      await this.steps.lookup(input.secret);
    } catch {
      // caught: the step's failure is recorded, the run goes on
    }
    return this.steps.wire({ note: input.secret });
  }
}

@DurableWorkflow('vault-failed', { maxAttempts: 1 })
class FailedWorkflow {
  async run(input: { secret: string }): Promise<never> {
    throw new Error(`boom ${input.secret}`);
  }
}

/** An app's "wait for the result" endpoint: its error replies come from DurableExceptionFilter. */
@Controller('orders')
@UseFilters(DurableExceptionFilter)
class OrdersController {
  constructor(private readonly runs: RunRepository) {}
  @Get(':id/result')
  result(@Param('id') id: string) {
    return this.runs.result(id, { timeoutMs: 200 });
  }
  @Get(':id/signal')
  async signal(@Param('id') id: string) {
    await this.runs.signal(id, 'go', { note: 'late' });
    return 'sent';
  }
}

interface Surfaces {
  logs: string[];
  spans: string;
  http: Record<string, string>;
  held: string;
}

/** Boots an app with every surface on, drives one held and one failed run, and collects what each shows. */
async function everySurface(db: TestDatabase, withHook: boolean): Promise<Surfaces> {
  const logs: string[] = [];
  const keep =
    (level: string) =>
    (m: unknown, ...rest: unknown[]) =>
      void logs.push(
        `${level} ${[m, ...rest].map((x) => (x instanceof Error ? x.stack : String(x))).join(' ')}`,
      );
  const logger: LoggerService = {
    log: keep('log'),
    error: keep('error'),
    warn: keep('warn'),
    debug: keep('debug'),
    verbose: keep('verbose'),
    fatal: keep('fatal'),
  };
  recorder.spans = [];
  let app: INestApplication | undefined;
  try {
    const booted = await bootHttpApp(db.url, {
      options: { logRunData: true, ...(withHook ? { redact } : {}) },
      imports: [
        DurableAdminModule.forRoot({
          path: 'durable',
          allowAnonymous: true,
          observability: { metrics: { snapshotTtlMs: 0 }, health: { detailed: true } },
        }),
      ],
      providers: [VaultSteps, HeldWorkflow, FailedWorkflow],
      controllers: [OrdersController],
      logger: logger as never,
    });
    app = booted.app;
    const runs = app.get(RunRepository);
    const held = (
      await runs.start('vault-held', { secret: SECRET }, { idempotencyKey: `k-${withHook}-${SECRET}` })
    ).run.id;
    const failed = (await runs.start('vault-failed', { secret: SECRET })).run.id;
    expect((await driveUntil(app, db, held, ['waiting'])).parkedReason).toContain('in doubt');
    expect((await driveUntil(app, db, failed)).status).toMatch(/failed|dead_lettered/);
    const http: Record<string, string> = {};
    for (const p of [
      '/metrics',
      '/durable/health',
      '/durable/api/runs',
      '/durable/api/stats',
      `/durable/api/runs/${held}`,
      `/durable/api/runs/${failed}`,
      '/durable',
      `/durable/runs/${held}`,
      `/durable/runs/${failed}`,
    ]) {
      const res = await fetch(`${booted.http}${p}`);
      expect({ p, status: res.status }).toEqual({ p, status: 200 });
      http[p] = await res.text();
    }
    // Error replies: a failed run's result (422), a held run's result that times out (202), a signal to
    // a finished run (409).
    for (const [p, status] of [
      [`/orders/${failed}/result`, 422],
      [`/orders/${held}/result`, 202],
      [`/orders/${failed}/signal`, 409],
    ] as const) {
      const res = await fetch(`${booted.http}${p}`);
      expect({ p, status: res.status }).toEqual({ p, status });
      http[p] = await res.text();
    }
    const spans = JSON.stringify(
      recorder.spans.map((s) => ({
        name: s.name,
        attributes: s.attributes,
        status: s.status,
        exceptions: s.exceptions.map((e) => (e instanceof Error ? `${e.message} ${e.stack}` : String(e))),
      })),
    );
    return { logs, spans, http, held };
  } finally {
    await app?.close();
  }
}

describe('a secret in run data, on every surface at once', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase('secret_everywhere');
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('without the hook, logs (logRunData) and spans show it: the check below can fail', async () => {
    const seen = await everySurface(db, false);
    expect(seen.logs.filter((l) => l.includes(SECRET)).length).toBeGreaterThan(0);
    expect(seen.spans).toContain(SECRET);
    expect(seen.http[`/durable/api/runs/${seen.held}`]).toContain(SECRET);
    expect(Object.keys(seen.http).filter((p) => p.startsWith('/orders/'))).toHaveLength(3);
  });

  it('with the hook, no log line, span, metric, health answer, admin response, page or error reply shows it', async () => {
    const seen = await everySurface(db, true);
    expect(seen.logs.filter((l) => l.includes(SECRET))).toEqual([]);
    expect(seen.logs.some((l) => l.includes('[hidden]'))).toBe(true); // logRunData still logs the message
    expect(seen.spans).not.toContain(SECRET);
    expect(seen.spans).toContain('[hidden]');
    expect(seen.http['/metrics']).toContain('durable_runs_due_without_worker'); // the surfaces answered
    expect(seen.http[`/durable/api/runs/${seen.held}`]).toContain('[hidden]');
    for (const [p, text] of Object.entries(seen.http)) {
      expect({ p, leaked: text.includes(SECRET) }).toEqual({ p, leaked: false });
    }
  });
});
