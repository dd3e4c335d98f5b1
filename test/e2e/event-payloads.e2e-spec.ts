import { readFileSync } from 'node:fs';
import path from 'node:path';
import { INestApplication, Injectable } from '@nestjs/common';
import {
  CommandContext,
  CommandFailedError,
  DURABLE_EVENT_PAYLOAD_KEYS,
  DURABLE_EVENT_TYPES,
  DurableEventType,
  DurableStep,
  DurableWorkflow,
  IdempotentCommand,
  NonRetryableError,
  RunContext,
  RunRepository,
  SignalTimeoutError,
} from '../../src';
import { Reconciler } from '../../src/maintenance/reconciler.service';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil } from '../helpers/drive';

/**
 * Issue 20, item 7: what each event type's payload holds, three ways that must agree: the payload types
 * (the compiler ties DURABLE_EVENT_PAYLOAD_KEYS to them), what real runs store (this test: every key of
 * every stored payload is a declared one), and docs/EVENTS.md (every declared key is named in its row).
 */

let doubtOnce = true;

@Injectable()
class Tools {
  @DurableStep({ name: 'ev_model', kind: 'model' })
  async model() {
    return { text: 'hi', usage: { promptTokens: 3 }, requestId: 'req-1' };
  }
  @DurableStep({ name: 'ev_tool', kind: 'tool' })
  async tool() {
    return 'tooled';
  }
  @DurableStep({ name: 'ev_bad', retry: { maxAttempts: 1 } })
  async bad(): Promise<never> {
    throw new NonRetryableError('no');
  }
  @IdempotentCommand({ name: 'ev_ok', inDoubt: 'lookup' })
  async ok(_a: { n: number }, ctx?: CommandContext) {
    if (doubtOnce) {
      doubtOnce = false;
      throw new Error('504 from the gateway'); // in doubt: the lookup finds it applied
    }
    return { key: ctx!.idempotencyKey };
  }
  @IdempotentCommand({ name: 'ev_refused', inDoubt: 'lookup' })
  async refused(): Promise<never> {
    throw new NonRetryableError('card declined');
  }
  @IdempotentCommand({ name: 'ev_approval', inDoubt: 'lookup', requiresApproval: true })
  async approval(a: { n: number }) {
    return { approved: a.n };
  }
  @IdempotentCommand({ name: 'ev_manual', inDoubt: 'manual' })
  async manual(): Promise<never> {
    throw new Error('connection reset');
  }
  lookupCommand(_command: string, key: string) {
    return Promise.resolve({ found: true as const, result: { key, looked: true } });
  }
}

@DurableWorkflow('ev-main')
class MainWorkflow {
  constructor(private readonly t: Tools) {}
  async run(_input: unknown, ctx: RunContext) {
    await this.t.model();
    await this.t.tool();
    await this.t.bad().catch(() => 'caught');
    await this.t.ok({ n: 1 });
    await this.t.refused().catch((e) => (e instanceof CommandFailedError ? 'refused' : Promise.reject(e)));
    await this.t.approval({ n: 1 });
    await this.t
      .approval({ n: 2 })
      .catch((e) => (e instanceof CommandFailedError ? 'rejected' : Promise.reject(e)));
    await ctx.sleep(1);
    await ctx
      .waitForSignal('quick', { timeoutMs: 1 })
      .catch((e) => (e instanceof SignalTimeoutError ? 0 : Promise.reject(e)));
    await ctx.waitForSignal('go');
    await this.t.manual();
    return 'done';
  }
}

@DurableWorkflow('ev-flaky', { maxAttempts: 2 })
class FlakyWorkflow {
  async run() {
    throw new Error('upstream 503');
  }
}

@DurableWorkflow('ev-fatal')
class FatalWorkflow {
  async run() {
    throw new NonRetryableError('bad input');
  }
}

@DurableWorkflow('ev-wait')
class WaitWorkflow {
  async run(_input: unknown, ctx: RunContext) {
    return ctx.waitForSignal('never');
  }
}

describe('event payloads: the types, what is stored, and docs/EVENTS.md agree', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let runs: RunRepository;

  beforeAll(async () => {
    db = await createTestDatabase('event_payloads');
    app = await bootApp(db.url, [Tools, MainWorkflow, FlakyWorkflow, FatalWorkflow, WaitWorkflow]);
    runs = app.get(RunRepository);
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('every key of every payload real runs store is a declared key of its event type', async () => {
    const main = (await runs.start(MainWorkflow, {}, { idempotencyKey: 'ev-main-1' })).run.id;
    const park = async (reason: RegExp) => {
      for (let i = 0; i < 10; i++) {
        const r = await driveUntil(app, db, main, ['waiting']);
        if (reason.test(r.parkedReason ?? '')) return;
      }
      throw new Error(`run ${main} never parked for ${reason}`);
    };
    await park(/awaiting approval/);
    await runs.approve(main, `run_${main}:step_5:ev_approval`, { by: 'alice', note: 'ok' });
    await park(/awaiting approval/);
    await runs.reject(main, `run_${main}:step_6:ev_approval`, { by: 'alice' });
    await park(/waiting for signal "go"/);
    await runs.signal(main, 'go', { yes: true }, 'bob');
    await park(/in doubt/);
    await runs.resolveCommand(
      `run_${main}:step_12:ev_manual`,
      { outcome: 'succeeded', result: { ok: 1 } },
      'carol',
    );
    expect((await driveUntil(app, db, main)).status).toBe('succeeded');

    const flaky = (await runs.start(FlakyWorkflow, {})).run.id;
    expect((await driveUntil(app, db, flaky)).status).toBe('dead_lettered');
    await runs.retry(flaky, 'dave');
    const fatal = (await runs.start(FatalWorkflow, {})).run.id;
    expect((await driveUntil(app, db, fatal)).status).toBe('failed');
    const waiting = (await runs.start(WaitWorkflow, {})).run.id;
    await driveUntil(app, db, waiting, ['waiting']);
    await runs.cancel(waiting, 'no longer needed', 'erin');
    // A worker that died: its lease expired, the reconciler hands the run back.
    const orphan = (await runs.start(WaitWorkflow, {})).run.id;
    await db.query(
      `update ai_runs set status = 'running', worker_id = 'gone', epoch = 1, attempts = 1,
              lease_expires_at = now() - interval '1 second' where id = $1`,
      [orphan],
    );
    await app.get(Reconciler).sweep();
    const running = (await runs.start(WaitWorkflow, {})).run.id;
    await db.query(
      `update ai_runs set status = 'running', worker_id = 'w', epoch = 1, lease_expires_at = now() + interval '1 minute' where id = $1`,
      [running],
    );
    await runs.cancel(running, 'stop', 'frank'); // requested: it is running

    const events = (await db.query(`select event_type, payload from ai_events order by id`)) as Array<{
      event_type: string;
      payload: Record<string, unknown> | null;
    }>;
    const undeclared: string[] = [];
    const seen = new Set<string>();
    for (const e of events) {
      expect(DURABLE_EVENT_TYPES).toContain(e.event_type);
      seen.add(e.event_type);
      const declared: readonly string[] = DURABLE_EVENT_PAYLOAD_KEYS[e.event_type as DurableEventType];
      for (const key of Object.keys(e.payload ?? {}))
        if (!declared.includes(key)) undeclared.push(`${e.event_type}.${key}`);
    }
    expect([...new Set(undeclared)]).toEqual([]);
    // The workload reaches most event types (those it does not: released, held, pruned, cleanup_started,
    // step.started… are written by paths other tests drive).
    expect(seen.size).toBeGreaterThanOrEqual(25);
  });

  it('docs/EVENTS.md names every event type, and every key of its payload in its row', () => {
    const doc = readFileSync(path.join(__dirname, '..', '..', 'docs', 'EVENTS.md'), 'utf8');
    const problems: string[] = [];
    for (const type of DURABLE_EVENT_TYPES) {
      const row = doc.split('\n').find((l) => l.startsWith(`| \`${type}\` |`));
      if (!row) {
        problems.push(`${type}: no row`);
        continue;
      }
      const payloadColumn = row.split(' | ').at(-1)!;
      for (const key of DURABLE_EVENT_PAYLOAD_KEYS[type])
        if (!payloadColumn.includes(`\`${key}\``)) problems.push(`${type}: ${key} not in its payload column`);
    }
    expect(problems).toEqual([]);
  });
});
