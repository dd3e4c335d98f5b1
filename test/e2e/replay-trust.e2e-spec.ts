import { INestApplication, Injectable } from '@nestjs/common';
import {
  CommandContext,
  CommandLookup,
  currentRun,
  DurableStep,
  DurableWorkflow,
  IdempotentCommand,
  RunContext,
  RunRepository,
} from '../../src';
import { DurableWorker } from '../../src/engine/worker.service';
import { DurableObservers } from '../../src/engine/durable-observers';
import { setPausePointHook } from '../../src/testing';
import { RunReadStore } from '../../src/store/run-reads.store';
import { Reconciler } from '../../src/maintenance/reconciler.service';
import { bootApp, bootModules, durableModule } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil } from '../helpers/drive';
import { TRAIL } from '../helpers/event-trail';

/**
 * Regression tests of issue 19 (replay you can trust), items 1–4, 6, 7, 9 and 11: ordinary workflow
 * code the model test did not write. Each shape failed on 0036f02 (see the note): the first
 * execution and the replay must hand the workflow the same values, every call must end recorded, and
 * what the engine decides must stand whatever the workflow does with the throw.
 */

const log: string[] = [];
const bodies = new Map<string, number>();
const bump = (k: string) => bodies.set(k, (bodies.get(k) ?? 0) + 1);
/** Values a command body or the workflow handed to the outside, by run. */
const sentOut = new Map<string, string[]>();
const send = (runId: string, v: string) => sentOut.set(runId, [...(sentOut.get(runId) ?? []), v]);
/** Bodies of `overrun` running at once, now and at most. */
const live = { now: 0, max: 0 };
/** Keys a (non-deduplicating) target saw: the lookup answers from here. */
const charged = new Map<string, number>();

@Injectable()
class Tools {
  constructor(private readonly runs: RunRepository) {}

  @DurableStep({ name: 'cancel_me' })
  async cancelMe(runId: string) {
    await this.runs.cancel(runId, 'the user changed their mind');
    return 'asked';
  }
  @DurableStep({ name: 'tool_calls' })
  async toolCalls() {
    return { second: { city: 'Paris' }, first: { city: 'Oslo' }, a: 1 };
  }

  @DurableStep({ name: 'act' })
  async act(key: string) {
    log.push(`act:${key}`);
    return key;
  }

  @DurableStep({ name: 'long_loop' })
  async longLoop(items: number) {
    const ctx = currentRun()!;
    for (let i = 0; i < items; i++) await ctx.progress(i, { done: i + 1 });
    return items;
  }

  @DurableStep({ name: 'flaky', retry: { maxAttempts: 2, initialDelayMs: 1 } })
  async flaky(runId: string, how: 'plain' | 'final') {
    bump(`flaky:${runId}`);
    if (how === 'final')
      throw Object.assign(new Error('card declined'), { retryable: false, code: 'E_DECLINED' });
    throw new Error('upstream 503');
  }

  /** Times out at 50 ms, runs 150 ms: a retry must not start beside the body still running. */
  @DurableStep({ name: 'overrun', timeoutMs: 50, retry: { maxAttempts: 2, initialDelayMs: 1 } })
  async overrun(runId: string) {
    bump(`overrun:${runId}`);
    live.now++;
    live.max = Math.max(live.max, live.now);
    await new Promise((r) => setTimeout(r, 150));
    live.now--;
    return 'late';
  }

  @DurableStep({ name: 'slow_a' })
  async slowA() {
    await new Promise((r) => setTimeout(r, 120));
    return 'a';
  }

  /** A compute step: its body starts at once, with no started mark to fail first. */
  @DurableStep({ name: 'paid_b' })
  async paidB(runId: string) {
    bump(`paid_b:${runId}`);
    await new Promise((r) => setTimeout(r, 100));
    return 'b';
  }

  @DurableStep({ name: 'audit' })
  async audit(runId: string) {
    bump(`audit:${runId}`);
    await new Promise((r) => setTimeout(r, 200));
    return 'audited';
  }

  @DurableStep({ name: 'no_json', retry: { maxAttempts: 3, initialDelayMs: 1 } })
  async noJson(runId: string) {
    bump(`no_json:${runId}`);
    return { toJSON: () => undefined };
  }

  @DurableStep({ name: 'swallow' })
  async swallow(runs: { charge(args: { amount: number }): Promise<unknown> }) {
    try {
      return await runs.charge({ amount: 1 });
    } catch {
      return 'the library turned the error into a tool result';
    }
  }
}

@Injectable()
class Vendor implements CommandLookup {
  constructor(private readonly tools: Tools) {}

  @IdempotentCommand({ name: 'tool_result', inDoubt: 'retry-with-key' })
  async toolResult(_args: { n: number }) {
    return { zeta: 1, beta: 2, alpha: 3 };
  }

  /** Draws a value and calls a step inside its body: neither may take a workflow position. */
  @IdempotentCommand({ name: 'order_supplier', inDoubt: 'retry-with-key' })
  async orderSupplier(args: { runId: string }, ctx?: CommandContext) {
    const orderNo = currentRun()!.uuid();
    const checked = await this.tools.act(`inside-command:${args.runId}`);
    send(args.runId, `${ctx!.idempotencyKey}=${orderNo}`);
    return { orderNo, checked };
  }

  /** A gateway 504: the charge may or may not have happened. `mode` says which. */
  @IdempotentCommand({ name: 'charge', inDoubt: 'lookup' })
  async charge(args: { amount: number; mode?: 'lost' | 'applied' }, ctx?: CommandContext) {
    bump(`charge:${ctx!.idempotencyKey}`);
    if (args.mode === 'applied') charged.set(ctx!.idempotencyKey, args.amount);
    if (args.mode) throw new Error('504 Gateway Timeout');
    charged.set(ctx!.idempotencyKey, args.amount);
    return { charged: args.amount };
  }

  @IdempotentCommand({ name: 'approved_refund', inDoubt: 'lookup', requiresApproval: true })
  async approvedRefund(_args: { amount: number }, ctx?: CommandContext) {
    bump(`approved_refund:${ctx!.idempotencyKey}`);
    return { refunded: true };
  }

  @IdempotentCommand({ name: 'mark_unpaid', inDoubt: 'retry-with-key' })
  async markUnpaid(_args: { runId: string }) {
    return { marked: true };
  }

  @IdempotentCommand({ name: 'odd_result', inDoubt: 'retry-with-key' })
  async oddResult(args: { runId: string }) {
    bump(`odd_result:${args.runId}`);
    return { toJSON: () => undefined, kept: 'field' };
  }

  async lookupCommand(_command: string, key: string) {
    return charged.has(key)
      ? { found: true as const, result: { charged: charged.get(key), via: 'lookup' } }
      : { found: false as const };
  }
}

@DurableWorkflow('trust')
class TrustWorkflow {
  constructor(
    private readonly tools: Tools,
    private readonly vendor: Vendor,
  ) {}

  async run(input: { shape: string; mode?: 'lost' | 'applied' }, ctx: RunContext): Promise<unknown> {
    switch (input.shape) {
      case 'keys': {
        // The everyday agent loop: one tool call per key of the model's map.
        const calls = await this.tools.toolCalls();
        const seen: string[] = [];
        for (const key of Object.keys(calls)) seen.push(await this.tools.act(`${ctx.runId}:${key}`));
        const result = await this.vendor.toolResult({ n: 1 });
        for (const key of Object.keys(result)) seen.push(await this.tools.act(`${ctx.runId}:r:${key}`));
        await ctx.waitForSignal('go');
        return { seen, order: Object.keys(calls), resultOrder: Object.keys(result) };
      }
      case 'command-body': {
        const order = await this.vendor.orderSupplier({ runId: ctx.runId });
        const after = ctx.uuid();
        await ctx.waitForSignal('go');
        return { order, after, last: await this.tools.act(`${ctx.runId}:last`) };
      }
      case 'value-progress': {
        const ref = ctx.uuid();
        send(ctx.runId, ref);
        await this.tools.longLoop(3);
        await ctx.waitForSignal('go');
        return { ref };
      }
      case 'caught-command': {
        let path: string;
        try {
          await this.vendor.charge({ amount: 5, mode: input.mode });
          path = 'paid';
        } catch {
          await this.vendor.markUnpaid({ runId: ctx.runId });
          path = 'unpaid';
        }
        await ctx.waitForSignal('go');
        return { path };
      }
      case 'caught-command-no-wait': {
        try {
          await this.vendor.charge({ amount: 5, mode: input.mode });
          return { path: 'paid' };
        } catch {
          return { path: 'unpaid' };
        }
      }
      case 'caught-step': {
        // A step failure the workflow gets past: the replay throws the same error at the same point.
        const seen: string[] = [];
        for (const how of ['plain', 'final'] as const) {
          try {
            await this.tools.flaky(ctx.runId, how);
          } catch (e) {
            const err = e as Error & { code?: string };
            seen.push(`${err.name}:${err.message}:${err.code ?? ''}`);
          }
        }
        const settled = await Promise.allSettled([
          this.tools.flaky(ctx.runId, 'plain'),
          this.tools.act(`${ctx.runId}:x`),
        ]);
        seen.push(settled.map((s) => s.status).join(','));
        await ctx.waitForSignal('go');
        return seen;
      }
      case 'cancel-at-reserve':
        return this.vendor.charge({ amount: 3 });
      case 'approval':
        return this.vendor.approvedRefund({ amount: 4 });
      case 'overrun':
        try {
          return await this.tools.overrun(ctx.runId);
        } catch (e) {
          return `gave up: ${(e as Error).name}`;
        }
      case 'observed-fan': {
        const [cmd, step] = await Promise.all([
          this.vendor.toolResult({ n: 2 }),
          this.tools.act(`${ctx.runId}:fan`),
        ]);
        return { cmd, step };
      }
      case 'bad-sleep':
        await ctx.sleep(-1);
        return 'slept';
      case 'park-sibling': {
        await Promise.all([ctx.sleep(10), this.tools.slowA().then(() => this.tools.paidB(ctx.runId))]);
        return 'both';
      }
      case 'fire-and-forget': {
        void this.tools.audit(ctx.runId);
        return 'done';
      }
      case 'to-json-undefined':
        return this.tools.noJson(ctx.runId);
      case 'command-to-json-undefined':
        return this.vendor.oddResult({ runId: ctx.runId });
      case 'swallowed-in-step':
        return this.tools.swallow(this.vendor);
      case 'caught-cancel': {
        await this.tools.cancelMe(ctx.runId); // its commit learns of the cancel
        try {
          await this.tools.act(`${ctx.runId}:after-cancel`);
        } catch {
          return 'the workflow says it succeeded';
        }
        return 'not cancelled';
      }
      default:
        throw new Error(`unknown shape ${input.shape}`);
    }
  }
}

let db: TestDatabase;
let app: INestApplication;
let runs: RunRepository;
const unhandled: unknown[] = [];
const onUnhandled = (reason: unknown) => unhandled.push(reason);

beforeAll(async () => {
  process.on('unhandledRejection', onUnhandled);
  db = await createTestDatabase('trust');
  app = await bootApp(db.url, [Tools, Vendor, TrustWorkflow], { worker: { workerId: 'trust-a' } });
  runs = app.get(RunRepository);
});
afterAll(async () => {
  process.off('unhandledRejection', onUnhandled);
  await app?.close();
  await db?.drop();
});

async function start(input: Record<string, unknown>): Promise<string> {
  return (await runs.start('trust', input)).run.id;
}

/** Drives the run to its wait, sends the signal, and drives it to the end (a second claim: a replay). */
async function throughReplay(id: string) {
  await driveUntil(app, db, id, ['waiting', 'succeeded', 'failed']);
  await runs.signal(id, 'go', null);
  return driveUntil(app, db, id);
}

describe('issue 19: what the first execution saw is what every replay sees', () => {
  it('item 1: a loop over the keys of a step result and of a command result replays in the same order', async () => {
    const id = await start({ shape: 'keys' });
    const run = await throughReplay(id);
    expect(run.status).toBe('succeeded');
    const out = run.output as { seen: string[]; order: string[]; resultOrder: string[] };
    // jsonb's order (shorter keys first, then by bytes), on the first execution as on the replay.
    expect(out.order).toEqual(['a', 'first', 'second']);
    expect(out.resultOrder).toEqual(['beta', 'zeta', 'alpha']);
    expect(out.seen).toEqual([
      `${id}:a`,
      `${id}:first`,
      `${id}:second`,
      `${id}:r:beta`,
      `${id}:r:zeta`,
      `${id}:r:alpha`,
    ]);
    expect(log.filter((l) => l.startsWith(`act:${id}:`))).toEqual(out.seen.map((s) => `act:${s}`));
  });

  it('item 2: a value drawn and a step called inside a command body take no workflow position', async () => {
    const id = await start({ shape: 'command-body' });
    const run = await throughReplay(id);
    expect(run.status).toBe('succeeded');
    const out = run.output as { order: { orderNo: string; checked: string }; after: string };
    expect(out.order.checked).toBe(`inside-command:${id}`);
    expect(sentOut.get(id)).toHaveLength(1);
    expect(sentOut.get(id)![0]).toMatch(new RegExp(`=${out.order.orderNo}$`));
    const names = (
      await db.query(`select step_index, step_name from ai_checkpoints where run_id = $1 order by 1`, [id])
    ).map((r) => `${r.step_index}:${r.step_name}`);
    expect(names).toEqual(['0:command:order_supplier', '1:$uuid', '2:$deadline:go', '3:$signal:go', '4:act']);
  });

  it('item 3: a recorded value is written by the write that carries it, not dropped by a progress write', async () => {
    const id = await start({ shape: 'value-progress' });
    const run = await throughReplay(id);
    expect(run.status).toBe('succeeded');
    // The supplier got the first execution's value; the replay returned that same value.
    expect(sentOut.get(id)![0]).toBe((run.output as { ref: string }).ref);
    const rows = await db.query(`select step_name from ai_checkpoints where run_id = $1 and step_index = 0`, [
      id,
    ]);
    expect(rows).toEqual([{ step_name: '$uuid' }]);
  });

  it('item 4: a caught 504 is settled by the lookup first; not found: recorded failed, and the catch path replays', async () => {
    const id = await start({ shape: 'caught-command', mode: 'lost' });
    const run = await throughReplay(id);
    expect(run.status).toBe('succeeded');
    expect(run.output).toEqual({ path: 'unpaid' });
    const cmds = await db.query(
      `select command_name, status, error->>'message' as error from ai_commands where run_id = $1 order by step_index`,
      [id],
    );
    expect(cmds).toEqual([
      { command_name: 'charge', status: 'failed', error: '504 Gateway Timeout' },
      { command_name: 'mark_unpaid', status: 'succeeded', error: null },
    ]);
    const events = await db.query<{ event_type: string }>(
      `select event_type from ${TRAIL} t where run_id = $1 and event_type like 'tool.command_%' order by id`,
      [id],
    );
    expect(events.map((e) => e.event_type)).toEqual([
      'tool.command_reserved',
      'tool.command_in_doubt',
      'tool.command_failed',
      'tool.command_reserved',
      'tool.command_succeeded',
    ]);
  });

  it('item 4: a caught 504 whose charge did happen returns the charge (found by lookup), sent once', async () => {
    const id = await start({ shape: 'caught-command', mode: 'applied' });
    const run = await throughReplay(id);
    expect(run.status).toBe('succeeded');
    expect(run.output).toEqual({ path: 'paid' });
    const [cmd] = await db.query(`select status, resolution from ai_commands where run_id = $1`, [id]);
    expect(cmd).toEqual({ status: 'succeeded', resolution: 'lookup' });
    expect(bodies.get(`charge:run_${id}:step_0:charge`)).toBe(1);
  });

  it('item 4: without a wait, the run never ends with an unsettled command', async () => {
    const id = await start({ shape: 'caught-command-no-wait', mode: 'lost' });
    const run = await driveUntil(app, db, id);
    expect(run).toMatchObject({ status: 'succeeded', output: { path: 'unpaid' } });
    const rows = await db.query(`select status from ai_commands where run_id = $1`, [id]);
    expect(rows).toEqual([{ status: 'failed' }]);
  });

  it('a caught step failure (retries spent, or not retryable) replays as the same error, the step not run again', async () => {
    const id = await start({ shape: 'caught-step' });
    const run = await throughReplay(id);
    expect(run.status).toBe('succeeded');
    expect(run.output).toEqual([
      'Error:upstream 503:',
      'Error:card declined:E_DECLINED',
      'rejected,fulfilled',
    ]);
    expect(bodies.get(`flaky:${id}`)).toBe(2 + 1 + 2); // no body ran again in the replay
    const failedEvents = await db.query(
      `select count(*)::int as n from ${TRAIL} t where run_id = $1 and event_type = 'step.failed'`,
      [id],
    );
    expect(failedEvents[0].n).toBe(3);
  });

  it('item 6: once a park begins, a sibling branch starts no new call (a paid step runs once)', async () => {
    const id = await start({ shape: 'park-sibling' });
    // paid_b takes 100 ms: started beside the park, its commit would come after the park and fail.
    const run = await driveUntil(app, db, id);
    expect(run.status).toBe('succeeded');
    expect(bodies.get(`paid_b:${id}`)).toBe(1);
    const saved = await db.query(
      `select count(*)::int as n from ${TRAIL} t where run_id = $1 and event_type = 'run.checkpoint_saved'`,
      [id],
    );
    expect(saved[0].n).toBe(2); // slow_a and paid_b, each committed once
  });

  it('item 7: a step still live when run() returns is let finish and recorded, as in JavaScript (issue 35)', async () => {
    const before = unhandled.length;
    const id = await start({ shape: 'fire-and-forget' });
    const run = await driveUntil(app, db, id);
    expect(run.status).toBe('succeeded');
    const audit = await db.query(
      `select count(*)::int as n from ai_checkpoints where run_id = $1 and step_name = 'audit'`,
      [id],
    );
    expect(audit[0].n).toBe(1); // its outcome recorded before the finish
    expect(unhandled.slice(before)).toEqual([]);
    expect(bodies.get(`audit:${id}`)).toBe(1);
  });

  it('item 8: result({ timeoutMs }) of 30 days waits quietly, not ~400 round trips a second', async () => {
    const reads = app.get(RunReadStore);
    const spy = jest.spyOn(reads, 'awaitOutcome');
    try {
      const started = await runs.start('trust', { shape: 'keys' }); // nothing drives it meanwhile
      const waiting = started.result({ timeoutMs: 30 * 24 * 3600_000 }).catch((e: unknown) => e);
      await new Promise((r) => setTimeout(r, 500));
      expect(spy.mock.calls.length).toBeLessThanOrEqual(2);
      await runs.cancel(started.run.id, 'test over');
      expect(await waiting).toMatchObject({ code: 'DURABLE_RUN_FAILED' });
    } finally {
      spy.mockRestore();
    }
  });

  it('item 9: a step result whose toJSON() returns undefined fails the run once (SerializationError)', async () => {
    const id = await start({ shape: 'to-json-undefined' });
    const run = await driveUntil(app, db, id);
    expect(run.status).toBe('failed');
    expect(run.error).toMatchObject({ code: 'DURABLE_NOT_SERIALIZABLE' });
    expect(bodies.get(`no_json:${id}`)).toBe(1);
  });

  it('item 9: a command result whose toJSON() returns undefined is never sent twice', async () => {
    const id = await start({ shape: 'command-to-json-undefined' });
    const run = await driveUntil(app, db, id);
    expect(['succeeded', 'failed']).toContain(run.status);
    expect(bodies.get(`odd_result:${id}`)).toBe(1);
    const [cmd] = await db.query(`select status from ai_commands where run_id = $1`, [id]);
    expect(['succeeded', 'failed']).toContain(cmd.status);
  });

  it('item 11: a command error caught inside a step (as an agent SDK does) still fails the run', async () => {
    const id = await start({ shape: 'swallowed-in-step' });
    const run = await driveUntil(app, db, id);
    expect(run.status).toBe('failed');
    expect(run.error).toMatchObject({ code: 'DURABLE_COMMAND_IN_STEP' });
    const [ev] = await db.query(
      `select payload from ${TRAIL} t where run_id = $1 and event_type = 'run.failed'`,
      [id],
    );
    expect(ev.payload.reason).toBe('usage');
  });

  it('item 11: a cancel the workflow catches still ends the run cancelled', async () => {
    const id = await start({ shape: 'caught-cancel' });
    const run = await driveUntil(app, db, id);
    expect(run.status).toBe('cancelled');
    expect(log).not.toContain(`act:${id}:after-cancel`);
  });

  it('item 12: a run whose worker died is due at once for its first expiries; one that keeps expiring backs off', async () => {
    const rows = await db.query<{ id: string; attempts: number }>(
      `insert into ai_runs (kind, input, status, worker_id, epoch, attempts, max_attempts, lease_expires_at)
       select 'trust', '{"shape":"keys"}', 'running', 'dead-worker', a, a, 20, now() - interval '1 second'
         from generate_series(1, 6) a returning id, attempts`,
    );
    await app.get(Reconciler).sweep();
    const due = await db.query<{ attempts: number; wait_ms: number; status: string }>(
      `select attempts, status, (extract(epoch from (available_at - now())) * 1000)::float8 as wait_ms
         from ai_runs where id = any($1::uuid[]) order by attempts`,
      [rows.map((r) => r.id)],
    );
    expect(due.map((d) => d.status)).toEqual(Array(6).fill('waiting'));
    for (const d of due.slice(0, 3)) expect(d.wait_ms).toBeLessThanOrEqual(0); // a kill costs one lease
    expect(due[3].wait_ms).toBeGreaterThan(500); // the 4th expiry without progress: 1 s ± 20 %
    expect(due[5].wait_ms).toBeGreaterThan(due[3].wait_ms);
    await db.query(`update ai_runs set status = 'cancelled' where id = any($1::uuid[])`, [
      rows.map((r) => r.id),
    ]);
  });

  describe('item 10', () => {
    afterEach(() => setPausePointHook(null));

    it('a cancel seen by a heartbeat between reserve and dispatch withdraws the reservation: not in doubt, never sent', async () => {
      const id = await start({ shape: 'cancel-at-reserve' });
      setPausePointHook(async (info) => {
        if (info.runId !== id || info.point !== 'after-write' || info.detail !== 'tool.command_reserved')
          return;
        await runs.cancel(id, 'changed my mind');
        await app.get(DurableWorker).heartbeat(); // sees the cancel: the run stops before the call
      });
      const run = await driveUntil(app, db, id);
      expect(run.status).toBe('cancelled');
      expect(bodies.get(`charge:run_${id}:step_0:charge`)).toBeUndefined();
      expect(await db.query(`select status from ai_commands where run_id = $1`, [id])).toEqual([]);
      const [ev] = await db.query(
        `select payload from ${TRAIL} t where run_id = $1 and event_type = 'run.cancelled'`,
        [id],
      );
      expect(ev.payload.notSent).toEqual([`run_${id}:step_0:charge`]);
    });

    it('a cancelled run leaves no command awaiting approval (closed, so retention can prune it)', async () => {
      const id = await start({ shape: 'approval' });
      await driveUntil(app, db, id, ['waiting']);
      await runs.cancel(id, 'no longer needed');
      expect((await runs.get(id))!.status).toBe('cancelled');
      const rows = await db.query(`select status, resolution from ai_commands where run_id = $1`, [id]);
      expect(rows).toEqual([{ status: 'rejected', resolution: 'run_cancelled' }]);
    });

    it('a step that times out while its body runs on: the retry starts only once that body settled', async () => {
      const id = await start({ shape: 'overrun' });
      const run = await driveUntil(app, db, id);
      expect(run).toMatchObject({ status: 'succeeded', output: 'gave up: StepTimeoutError' });
      expect(bodies.get(`overrun:${id}`)).toBe(2);
      expect(live.max).toBe(1);
    });

    it("an observer that awaits before calling next() does not move a command's index", async () => {
      const remove = app.get(DurableObservers).add({
        async wrapStep(_info, next) {
          await new Promise((r) => setTimeout(r, 20));
          return next();
        },
      });
      try {
        const id = await start({ shape: 'observed-fan' });
        expect((await driveUntil(app, db, id)).status).toBe('succeeded');
        const rows = await db.query(
          `select step_index, step_name from ai_checkpoints where run_id = $1 order by 1`,
          [id],
        );
        expect(rows.map((r) => `${r.step_index}:${r.step_name}`)).toEqual(['0:command:tool_result', '1:act']);
      } finally {
        remove();
      }
    });

    it('a worker warns at start about unfinished runs of a kind it does not run (a renamed workflow)', async () => {
      await db.query(`insert into ai_runs (kind, input) values ('triage-v1', '{}'), ('triage-v1', '{}')`);
      const warnings: string[] = [];
      const logger = {
        log: () => undefined,
        error: () => undefined,
        warn: (m: unknown) => warnings.push(String(m)),
      };
      const other = await bootModules(
        {
          imports: [durableModule(db.url, { worker: { enabled: true, workerId: 'trust-b' } })],
          providers: [Tools, Vendor, TrustWorkflow],
        },
        logger,
      );
      try {
        for (let i = 0; i < 50 && !warnings.some((w) => w.includes('triage-v1')); i++)
          await new Promise((r) => setTimeout(r, 20));
        expect(warnings.find((w) => w.includes('triage-v1'))).toMatch(
          /unfinished runs of kinds worker trust-b does not run: triage-v1 \(2 runs\)/,
        );
      } finally {
        await other.close();
        await db.query(`delete from ai_runs where kind = 'triage-v1'`);
      }
    });

    it('ctx.sleep(-1) fails the run once with DURABLE_MISUSE, not after five retries', async () => {
      const id = await start({ shape: 'bad-sleep' });
      const run = await driveUntil(app, db, id);
      expect(run).toMatchObject({ status: 'failed', epoch: 1, error: { code: 'DURABLE_MISUSE' } });
    });
  });

  it('no promise the engine created was left to reject unhandled in this file', () => {
    expect(unhandled).toEqual([]);
    expect(app.get(DurableWorker).inFlightCount).toBe(0);
  });
});
