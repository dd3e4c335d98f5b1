import { INestApplication, Injectable } from '@nestjs/common';
import {
  CommandContext,
  CommandGateway,
  DurableStep,
  DurableWorkflow,
  IdempotentCommand,
  NonRetryableError,
  RunContext,
  RunRepository,
} from '../../src';
import { DurableWorker } from '../../src/engine/worker.service';
import { setPausePointHook } from '../../src/testing';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil, driveUntilHeld } from '../helpers/drive';

/**
 * Regression tests of issue 13, items 3, 6 and 7: fan-out (`Promise.all`) replays with the same step
 * indexes and command keys whatever order its branches finished in; a replay that cannot be made
 * deterministic fails before any external call; bad data inside a run fails it once, with its error
 * kept, and never repeats paid work; smaller breaks (a command inside a step, a cancel seen at
 * reserve, a step returning undefined).
 */

/** A key-deduplicating provider: one effect per key, the first result for a repeat. */
const applied = new Map<string, { item: string; amount: number; n: number }>();
const effectsByItem = new Map<string, number>();
let charges = 0;
const priceCalls = new Map<string, number>();
const bump = (m: Map<string, number>, k: string) => m.set(k, (m.get(k) ?? 0) + 1);
/** Flips to make the workflow take another path on replay. */
let diverge = false;
const failOnce = new Set<string>();
const calls = { nul: 0, nonRetryable: 0, undef: 0, nulCommand: 0, inStep: 0, cancelled: 0, slow: 0 };

@Injectable()
class Payments {
  @IdempotentCommand({ name: 'charge', inDoubt: 'retry-with-key' })
  async charge(args: { item: string; amount: number; toolCallId: string }, ctx?: CommandContext) {
    if (args.item === 'z') calls.cancelled++;
    const seen = applied.get(ctx!.idempotencyKey);
    if (seen) return seen;
    bump(effectsByItem, args.item);
    const result = { item: args.item, amount: args.amount, n: ++charges };
    applied.set(ctx!.idempotencyKey, result);
    return result;
  }

  @IdempotentCommand({ name: 'echo_nul', inDoubt: 'retry-with-key' })
  async echoNul(_args: { x: number }) {
    calls.nulCommand++;
    return { text: 'bad\u0000byte' };
  }
}

@Injectable()
class Tools {
  constructor(private readonly payments: Payments) {}

  /** Finishes in reverse order of `i` on the first execution: completion order ≠ call order. */
  @DurableStep({ name: 'price', kind: 'tool' })
  async price(item: string, i: number, n: number) {
    bump(priceCalls, item);
    await new Promise((r) => setTimeout(r, (n - i) * 15));
    return { amount: 100 + i };
  }

  @DurableStep({ name: 'after_fanout', retry: { maxAttempts: 1 } })
  async afterFanout(runId: string) {
    if (failOnce.delete(runId)) throw new Error('transient: the run is retried and replays the fan-out');
    return 'ok';
  }

  @DurableStep({ name: 'slow_model', kind: 'model' })
  async slowModel() {
    calls.slow++;
    await new Promise((r) => setTimeout(r, 150));
    return { tokens: 14000 };
  }

  @DurableStep({ name: 'model_nul', kind: 'model' })
  async modelNul() {
    calls.nul++;
    return { text: 'a\u0000b' };
  }

  @DurableStep({ name: 'fails_badly', kind: 'tool' })
  async failsBadly() {
    calls.nonRetryable++;
    throw new NonRetryableError('refused: \u0000 and \uD800 in the message');
  }

  @DurableStep({ name: 'returns_nothing', kind: 'tool' })
  async returnsNothing(): Promise<void> {
    calls.undef++;
  }

  @DurableStep({ name: 'charges_inside', kind: 'tool' })
  async chargesInside() {
    calls.inStep++;
    return this.payments.charge({ item: 'inside', amount: 1, toolCallId: 'x' });
  }
}

@DurableWorkflow('fan')
class FanWorkflow {
  constructor(
    private readonly tools: Tools,
    private readonly payments: Payments,
  ) {}
  async run(input: { items: string[]; shape?: string }, ctx: RunContext) {
    switch (input.shape) {
      case 'nul-step':
        return this.tools.modelNul();
      case 'non-retryable':
        return this.tools.failsBadly();
      case 'undefined':
        return { r: (await this.tools.returnsNothing()) ?? 'was null' };
      case 'nul-command':
        return this.payments.echoNul({ x: 1 });
      case 'in-step':
        return this.tools.chargesInside();
      case 'wait-beside-model': {
        const [signal, model] = await Promise.all([ctx.waitForSignal('go'), this.tools.slowModel()]);
        return { signal, model };
      }
    }
    const n = input.items.length;
    const items = diverge ? [...input.items].reverse() : input.items;
    const charged = await Promise.all(
      items.map(async (item, i) =>
        this.payments.charge({
          item,
          amount: (await this.tools.price(item, i, n)).amount,
          toolCallId: `call_${item}`,
        }),
      ),
    );
    await this.tools.afterFanout(ctx.runId);
    return charged;
  }
}

let db: TestDatabase;
let app: INestApplication;

beforeAll(async () => {
  db = await createTestDatabase('replay');
  app = await bootApp(db.url, [Payments, Tools, FanWorkflow], { worker: { concurrency: 4 } });
});
afterAll(async () => {
  setPausePointHook(null);
  await app?.close();
  await db?.drop();
});

const start = async (input: { items: string[]; shape?: string }) =>
  (await app.get(RunRepository).start('fan', input)).run.id;

describe('fan-out replays deterministically (item 3)', () => {
  it('Promise.all whose branches finish out of order gets the same keys on replay: one effect per tool call', async () => {
    const items = ['a', 'b', 'c', 'd', 'e'];
    const id = await start({ items });
    failOnce.add(id);
    const view = await driveUntil(app, db, id);
    expect(view.status).toBe('succeeded');
    for (const item of items) {
      expect(effectsByItem.get(item)).toBe(1);
      expect(priceCalls.get(item)).toBe(1);
    }
    // Every branch got its own charge back, each under one key that carries its tool call id.
    const out = view.output as Array<{ item: string; amount: number }>;
    expect(out.map((c) => c.item)).toEqual(items);
    expect(out.map((c) => c.amount)).toEqual([100, 101, 102, 103, 104]);
    const commands = await app.get(CommandGateway).listForRun(id);
    expect(commands.every((c) => c.status === 'succeeded')).toBe(true);
    for (const item of items)
      expect(
        commands.filter((c) => c.idempotencyKey.includes(`:tool_call_call_${item}:charge`)),
      ).toHaveLength(1);
    expect(commands).toHaveLength(items.length);
  });

  it('a wait in one branch lets a paid call in a sibling branch finish and commit before the run parks', async () => {
    const id = await start({ items: [], shape: 'wait-beside-model' });
    const worker = app.get(DurableWorker);
    await worker.tick();
    await worker.idle();
    const [row] = await db.query(`select status from ai_runs where id = $1`, [id]);
    expect(row.status).toBe('waiting');
    const saved = await db.query(
      `select 1 from ai_checkpoints where run_id = $1 and step_name = 'slow_model'`,
      [id],
    );
    expect(saved).toHaveLength(1);
    await app.get(RunRepository).signal(id, 'go', 'ok');
    const view = await driveUntil(app, db, id);
    expect(view).toMatchObject({ status: 'succeeded', output: { signal: 'ok', model: { tokens: 14000 } } });
    expect(calls.slow).toBe(1);
  });

  it('a replay that takes another path fails with NonDeterminismError before any external call', async () => {
    const items = ['p', 'q', 'r'];
    const id = await start({ items });
    failOnce.add(id);
    await driveUntil(app, db, id, ['waiting']); // first attempt: everything charged, then the transient failure
    for (const item of items) expect(effectsByItem.get(item)).toBe(1);
    const before = charges;
    diverge = true;
    try {
      const view = await driveUntilHeld(app, db, id);
      expect(view.status).toBe('waiting'); // held for a fixed deploy, its error kept
      expect(view.error).toMatchObject({ code: 'DURABLE_NON_DETERMINISM' });
    } finally {
      diverge = false;
    }
    expect(charges).toBe(before);
    for (const item of items) expect(priceCalls.get(item)).toBe(1);
  });
});

describe('bad data fails a run once, with its error kept (item 6)', () => {
  it('a step result PostgreSQL cannot store fails the run at once: the paid call is not repeated', async () => {
    const id = await start({ items: [], shape: 'nul-step' });
    const view = await driveUntil(app, db, id);
    expect(view.status).toBe('failed');
    expect(view.error).toMatchObject({ code: 'DURABLE_NOT_SERIALIZABLE' });
    expect((view.error as { message: string }).message).toContain('NUL');
    expect(calls.nul).toBe(1);
  });

  it('a NonRetryableError whose message PostgreSQL cannot store is recorded (sanitised), once', async () => {
    const id = await start({ items: [], shape: 'non-retryable' });
    const view = await driveUntil(app, db, id);
    expect(view.status).toBe('failed');
    expect((view.error as { message: string }).message).toBe('refused: \uFFFD and \uFFFD in the message');
    expect(calls.nonRetryable).toBe(1);
    const events = await app.get(RunRepository).events(id);
    expect(events.map((e) => e.type)).toContain('run.failed');
  });

  it('a command result PostgreSQL cannot store is kept (made storable) and the command is not sent again', async () => {
    const id = await start({ items: [], shape: 'nul-command' });
    const view = await driveUntil(app, db, id);
    expect(view).toMatchObject({ status: 'succeeded', output: { text: 'bad\uFFFDbyte' } });
    expect(calls.nulCommand).toBe(1);
  });
});

describe('smaller breaks of the promise (item 7)', () => {
  it('a step returning undefined records null: the run succeeds and the step is not re-run', async () => {
    const id = await start({ items: [], shape: 'undefined' });
    const view = await driveUntil(app, db, id);
    expect(view.error).toBeNull();
    expect(view).toMatchObject({ status: 'succeeded', output: { r: 'was null' } });
    expect(calls.undef).toBe(1);
  });

  it('a command called inside a step is refused with a typed error, never sent', async () => {
    const before = charges;
    const id = await start({ items: [], shape: 'in-step' });
    const view = await driveUntil(app, db, id);
    expect(view.status).toBe('failed');
    expect(view.error).toMatchObject({ code: 'DURABLE_COMMAND_IN_STEP' });
    expect(charges).toBe(before);
    expect(calls.inStep).toBe(1);
  });

  it('a cancel seen at reserve leaves no command in doubt', async () => {
    const id = await start({ items: ['z'] });
    const runs = app.get(RunRepository);
    setPausePointHook(async (p) => {
      if (p.runId !== id || p.point !== 'before-write' || p.detail !== 'tool.command_reserved') return;
      setPausePointHook(null);
      await runs.cancel(id, 'stop'); // seen by the reserve statement itself
    });
    const view = await driveUntil(app, db, id);
    expect(calls.cancelled).toBe(0);
    expect(view.status).toBe('cancelled');
    expect(await app.get(CommandGateway).listForRun(id)).toEqual([]);
  });
});

describe('RunRepository.result() waits through NOTIFY (issue 14, item 5)', () => {
  it('resolves with the output as soon as the run ends, long before its timeout', async () => {
    const runs = app.get(RunRepository);
    const id = await start({ items: [], shape: 'undefined' });
    const waited = runs.result<{ r: string }>(id, { timeoutMs: 20_000 });
    await new Promise((r) => setTimeout(r, 300)); // the waiter is listening; the run has not started
    const ended = Date.now();
    await driveUntil(app, db, id);
    await expect(waited).resolves.toEqual({ r: 'was null' });
    expect(Date.now() - ended).toBeLessThan(5_000);
  });

  it('the start result is a handle: result() waits for that run, and it still serialises as { run, created }', async () => {
    const runs = app.get(RunRepository);
    const started = await runs.start<{ items: string[]; shape: string }>('fan', {
      items: [],
      shape: 'undefined',
    });
    expect(JSON.parse(JSON.stringify(started))).toEqual({
      run: expect.objectContaining({ id: started.run.id }),
      created: true,
    });
    const waited = started.result({ timeoutMs: 20_000 });
    await driveUntil(app, db, started.run.id);
    await expect(waited).resolves.toEqual({ r: 'was null' });
  });

  it('throws RunFailedError for a failed or cancelled run, ResultTimeoutError when it has not ended', async () => {
    const runs = app.get(RunRepository);
    const failing = await start({ items: [], shape: 'non-retryable' });
    const failed = expect(runs.result(failing, { timeoutMs: 20_000 })).rejects.toMatchObject({
      code: 'DURABLE_RUN_FAILED',
      status: 'failed',
    });
    await driveUntil(app, db, failing);
    await failed;

    const waiting = await start({ items: [], shape: 'wait-beside-model' });
    await driveUntil(app, db, waiting, ['waiting']);
    await expect(runs.result(waiting, { timeoutMs: 50 })).rejects.toMatchObject({
      code: 'DURABLE_RESULT_TIMEOUT',
    });
    const cancelled = expect(runs.result(waiting, { timeoutMs: 20_000 })).rejects.toMatchObject({
      code: 'DURABLE_RUN_FAILED',
      status: 'cancelled',
    });
    await new Promise((r) => setTimeout(r, 100));
    await runs.cancel(waiting, 'no longer needed');
    await cancelled;
  });
});
