import { Body, Controller, INestApplication, Injectable, Param, Post } from '@nestjs/common';
import {
  CommandContext,
  CommandFailedError,
  CommandGateway,
  CommandLookup,
  CommandNotFoundError,
  DurableStep,
  DurableWorkflow,
  IdempotentCommand,
  InvalidCommandStateError,
  InvalidRunStateError,
  RunContext,
  RunRepository,
  SerializationError,
  SignalTimeoutError,
} from '../../src';
import { bootHttpApp } from '../helpers/app';
import { DurableWorker } from '../../src/engine/worker.service';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil, gate } from '../helpers/drive';
import { charge, FakeTarget, lookupCharge, startFakeTarget } from '../helpers/fake-target';

let target: FakeTarget;
/** Keys whose next call applies the charge and then loses the answer (a timeout after the effect). */
const loseAnswer = new Set<string>();
const calls: string[] = [];

async function chargeAndMaybeLose(args: { amount: number }, ctx: CommandContext) {
  calls.push(ctx.idempotencyKey);
  const res = await charge(target.url, ctx.idempotencyKey, args.amount);
  if (loseAnswer.delete(ctx.idempotencyKey.replace(/^run_[^:]+:/, ''))) throw new Error('socket hang up');
  return res;
}

@Injectable()
class LookupPayments implements CommandLookup {
  @IdempotentCommand({
    name: 'charge_lookup',
    inDoubt: 'lookup',
    requiresApproval: (a: { amount: number }) => a.amount > 1000,
  })
  chargeCard(args: { amount: number }, ctx?: CommandContext) {
    return chargeAndMaybeLose(args, ctx!);
  }
  lookupCommand(_command: string, key: string) {
    return lookupCharge(target.url, key);
  }
}

@Injectable()
class KeyedPayments {
  @IdempotentCommand({ name: 'charge_keyed', inDoubt: 'retry-with-key' })
  chargeCard(args: { amount: number }, ctx?: CommandContext) {
    return chargeAndMaybeLose(args, ctx!);
  }
}

@Injectable()
class ManualPayments {
  @IdempotentCommand({ name: 'charge_manual', inDoubt: 'manual' })
  chargeCard(args: { amount: number }, ctx?: CommandContext) {
    return chargeAndMaybeLose(args, ctx!);
  }
}

@DurableWorkflow('pay')
class PayWorkflow {
  constructor(
    private readonly lookup: LookupPayments,
    private readonly keyed: KeyedPayments,
    private readonly manual: ManualPayments,
  ) {}
  async run(input: { policy: 'lookup' | 'keyed' | 'manual'; amount: number }) {
    const svc = { lookup: this.lookup, keyed: this.keyed, manual: this.manual }[input.policy];
    const first = await svc.chargeCard({ amount: input.amount });
    return { first };
  }
}

@DurableWorkflow('approval')
class ApprovalWorkflow {
  constructor(private readonly p: LookupPayments) {}
  async run(input: { amount: number }) {
    try {
      return { charged: await this.p.chargeCard({ amount: input.amount }) };
    } catch (err) {
      if (err instanceof CommandFailedError && err.code === 'DURABLE_COMMAND_REJECTED')
        return { rejected: true };
      throw err;
    }
  }
}

@DurableWorkflow('signals')
class SignalWorkflow {
  async run(input: { timeoutMs?: number }, ctx: RunContext) {
    try {
      return { got: await ctx.waitForSignal('approval', { timeoutMs: input.timeoutMs }) };
    } catch (err) {
      if (err instanceof SignalTimeoutError) return { timedOut: true };
      throw err;
    }
  }
}

@DurableWorkflow('sleepy')
class SleepyWorkflow {
  async run(input: { ms: number }, ctx: RunContext) {
    const before = ctx.now().getTime();
    await ctx.sleep(input.ms);
    return { slept: ctx.now().getTime() - before };
  }
}

let holdStep: ReturnType<typeof gate> | null = null;
let inStep: ReturnType<typeof gate> | null = null;

@Injectable()
class SlowStep {
  @DurableStep()
  async think() {
    inStep?.open();
    await holdStep?.promise;
    return 'thought';
  }
}

@DurableWorkflow('two-charges')
class TwoCharges {
  constructor(
    private readonly p: KeyedPayments,
    private readonly s: SlowStep,
  ) {}
  async run() {
    await this.p.chargeCard({ amount: 1 });
    await this.s.think();
    await this.p.chargeCard({ amount: 2 });
    return 'done';
  }
}

let hanging: ReturnType<typeof gate> | null = null;

@Injectable()
class HangingPayments {
  @IdempotentCommand({ name: 'charge_hang', inDoubt: 'manual' })
  async chargeCard(args: { amount: number }, ctx?: CommandContext) {
    await charge(target.url, ctx!.idempotencyKey, args.amount);
    hanging?.open();
    // The answer never comes; only the run's AbortSignal ends the wait.
    return new Promise((_, reject) =>
      ctx!.signal.addEventListener('abort', () => reject(ctx!.signal.reason)),
    );
  }
}

@DurableWorkflow('hang')
class HangWorkflow {
  constructor(private readonly p: HangingPayments) {}
  async run() {
    return this.p.chargeCard({ amount: 3 });
  }
}

@DurableWorkflow('bad-args')
class BadArgs {
  constructor(private readonly p: KeyedPayments) {}
  async run() {
    return this.p.chargeCard({ amount: 1n } as unknown as { amount: number });
  }
}

@Controller('runs')
class ApprovalsController {
  constructor(private readonly runs: RunRepository) {}
  @Post(':id/approve')
  async approve(@Param('id') id: string, @Body() body: { key: string; by: string }) {
    await this.runs.approve(id, body.key, { by: body.by, note: 'within policy' });
    return { ok: true };
  }
}

describe('side effects as commands (in process)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let runs: RunRepository;
  let http: string;

  beforeAll(async () => {
    target = await startFakeTarget({ honoursKeys: true });
    db = await createTestDatabase('commands');
    ({ app, http } = await bootHttpApp(db.url, {
      providers: [
        LookupPayments,
        KeyedPayments,
        ManualPayments,
        PayWorkflow,
        ApprovalWorkflow,
        SignalWorkflow,
        SleepyWorkflow,
        TwoCharges,
        BadArgs,
        SlowStep,
        HangingPayments,
        HangWorkflow,
      ],
      options: { reconciler: { backoffBaseMs: 1, backoffMaxMs: 5 } },
      controllers: [ApprovalsController],
    }));
    runs = app.get(RunRepository);
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
    await target?.close();
  });

  const effectsOf = (runId: string) =>
    Object.entries(target.effects()).filter(([k]) => k.startsWith(`run_${runId}:`));

  it('dispatches once with a deterministic key and replays the stored result', async () => {
    const { run } = await runs.start('pay', { policy: 'keyed', amount: 5 });
    const done = await driveUntil(app, db, run.id);
    expect(done.status).toBe('succeeded');
    const effects = effectsOf(run.id);
    expect(effects).toEqual([[`run_${run.id}:step_0:charge_keyed`, 1]]);
    const [cmd] = await app.get(CommandGateway).listForRun(run.id);
    expect(cmd).toMatchObject({
      status: 'succeeded',
      result: (done.output as any).first,
      name: 'charge_keyed',
    });
    const types = (await runs.events(run.id)).map((e) => e.type);
    expect(types).toEqual([
      'run.created',
      'run.claimed',
      'tool.command_reserved',
      'tool.command_succeeded',
      'run.succeeded',
    ]);
  });

  it.each([
    ['lookup', 'lookup'],
    ['keyed', 'retry-with-key'],
  ])('an outcome hidden after the target applied it (%s): the effect stays 1', async (policy) => {
    const { run } = await runs.start('pay', { policy, amount: 7 });
    loseAnswer.add(`step_0:charge_${policy}`);
    const done = await driveUntil(app, db, run.id);
    expect(done.status).toBe('succeeded');
    expect(effectsOf(run.id).map(([, n]) => n)).toEqual([1]);
    const calledAgain = calls.filter((k) => k.startsWith(`run_${run.id}:`)).length;
    expect(calledAgain).toBe(policy === 'lookup' ? 1 : 2); // lookup found it; retry-with-key re-sent the key
    if (policy === 'lookup') {
      const resolved = (await runs.events(run.id)).find((e) => e.type === 'command.resolved');
      expect(resolved?.payload).toMatchObject({ by: 'lookup', found: true });
    }
  });

  it('manual: the run parks for an operator, and resolveCommand finishes it without another call', async () => {
    const { run } = await runs.start('pay', { policy: 'manual', amount: 9 });
    loseAnswer.add('step_0:charge_manual');
    const parked = await driveUntil(app, db, run.id, ['waiting'], 10).then(async () => {
      const worker = app.get(DurableWorker);
      for (let i = 0; i < 5; i++) {
        await db.query(`update ai_runs set available_at = now() where id = $1 and parked_reason is null`, [
          run.id,
        ]);
        await worker.tick();
        await worker.idle();
      }
      return (await runs.get(run.id))!;
    });
    expect(parked.status).toBe('waiting');
    expect(parked.parkedReason).toContain('in doubt');
    const key = `run_${run.id}:step_0:charge_manual`;
    const [cmd] = await app.get(CommandGateway).listForRun(run.id);
    expect(cmd.status).toBe('in_doubt');
    await expect(runs.approve(run.id, key, { by: 'ops' })).rejects.toBeInstanceOf(InvalidCommandStateError);
    await runs.resolveCommand(
      key,
      { outcome: 'succeeded', result: { chargeId: 'from-ops' } },
      'ops@example.com',
    );
    const done = await driveUntil(app, db, run.id);
    expect(done).toMatchObject({ status: 'succeeded', output: { first: { chargeId: 'from-ops' } } });
    expect(calls.filter((k) => k === key)).toHaveLength(1);
    await expect(runs.resolveCommand(key, { outcome: 'retry' })).rejects.toBeInstanceOf(
      InvalidCommandStateError,
    );
  });

  it('approval through an HTTP controller that injects RunRepository', async () => {
    const { run } = await runs.start('approval', { amount: 5000 });
    const parked = await driveUntil(app, db, run.id, ['waiting']);
    expect(parked.parkedReason).toContain('awaiting approval');
    expect(effectsOf(run.id)).toEqual([]);
    const key = `run_${run.id}:step_0:charge_lookup`;
    const res = await fetch(`${http}/runs/${run.id}/approve`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ key, by: 'alice' }),
    });
    expect(res.status).toBe(201);
    const done = await driveUntil(app, db, run.id);
    expect(done.status).toBe('succeeded');
    expect(effectsOf(run.id)).toEqual([[key, 1]]);
    const approved = (await runs.events(run.id)).find((e) => e.type === 'command.approved');
    expect(approved?.payload).toMatchObject({ by: 'alice', note: 'within policy' });
  });

  it('a rejected command is never dispatched and the workflow sees DURABLE_COMMAND_REJECTED', async () => {
    const { run } = await runs.start('approval', { amount: 5000 });
    await driveUntil(app, db, run.id, ['waiting']);
    await runs.reject(run.id, `run_${run.id}:step_0:charge_lookup`, { by: 'bob', note: 'too much' });
    const done = await driveUntil(app, db, run.id);
    expect(done).toMatchObject({ status: 'succeeded', output: { rejected: true } });
    expect(effectsOf(run.id)).toEqual([]);
  });

  it('a signal sent before the wait is delivered; a wait with no signal times out', async () => {
    const { run } = await runs.start('signals', {});
    await runs.signal(run.id, 'approval', { ok: 1 });
    const first = await driveUntil(app, db, run.id);
    expect(first).toMatchObject({ status: 'succeeded', error: null });
    expect(first.output).toEqual({ got: { ok: 1 } });

    const late = (await runs.start('signals', {})).run;
    expect((await driveUntil(app, db, late.id, ['waiting'])).parkedReason).toContain('signal "approval"');
    await runs.signal(late.id, 'approval', 'yes');
    expect((await driveUntil(app, db, late.id)).output).toEqual({ got: 'yes' });

    const timed = (await runs.start('signals', { timeoutMs: 300 })).run;
    await driveUntil(app, db, timed.id, ['waiting']);
    await new Promise((r) => setTimeout(r, 400));
    expect((await driveUntil(app, db, timed.id)).output).toEqual({ timedOut: true });
    await expect(runs.signal(timed.id, 'approval', 1)).rejects.toBeInstanceOf(InvalidRunStateError);
  });

  it('ctx.sleep parks the run with a due time from the database clock and holds no worker', async () => {
    const { run } = await runs.start('sleepy', { ms: 1500 });
    const worker = app.get(DurableWorker);
    await worker.tick();
    await worker.idle();
    const parked = (await runs.get(run.id))!;
    expect(parked.status).toBe('waiting');
    expect(worker.inFlightCount).toBe(0);
    const [row] = await db.query(
      `select extract(epoch from (available_at - updated_at)) * 1000 as ms from ai_runs where id = $1`,
      [run.id],
    );
    expect(Number(row.ms)).toBeGreaterThan(1400);
    expect(Number(row.ms)).toBeLessThan(1600);
  });

  it('cancelling a running run stops it before its next command', async () => {
    holdStep = gate();
    inStep = gate();
    const { run } = await runs.start('two-charges', {});
    const worker = app.get(DurableWorker);
    await worker.tick();
    await inStep.promise; // first charge done; now inside the step between the two charges
    expect((await runs.cancel(run.id, 'customer called')).status).toBe('running');
    holdStep.open();
    await worker.idle();
    const done = (await runs.get(run.id))!;
    expect(done.status).toBe('cancelled');
    expect(effectsOf(run.id).map(([k]) => k)).toEqual([`run_${run.id}:step_0:charge_keyed`]);
    expect(calls.filter((k) => k.startsWith(`run_${run.id}:`))).toHaveLength(1); // never called again
    const types = (await runs.events(run.id)).map((e) => e.type);
    expect(types.slice(-2)).toEqual(['run.checkpoint_saved', 'run.cancelled']);
    holdStep = null;
    inStep = null;
  });

  it('a cancel seen at the heartbeat aborts a command in flight and lists it as in doubt on the run', async () => {
    hanging = gate();
    const { run } = await runs.start('hang', {});
    const worker = app.get(DurableWorker);
    await worker.tick();
    await hanging.promise; // the target applied the charge; the answer is still pending
    await runs.cancel(run.id, 'stop now');
    await worker.heartbeat();
    await worker.idle();
    expect((await runs.get(run.id))!.status).toBe('cancelled');
    const doubt = await app.get(CommandGateway).listForRun(run.id, { status: 'in_doubt' });
    expect(doubt.map((c) => c.idempotencyKey)).toEqual([`run_${run.id}:step_0:charge_hang`]);
    hanging = null;
  });

  it('bad input is a typed error and changes nothing', async () => {
    const { run } = await runs.start('bad-args', {});
    const done = await driveUntil(app, db, run.id);
    expect(done.status).toBe('failed');
    expect(done.error?.code).toBe('DURABLE_NOT_SERIALIZABLE');
    expect(done.error?.message).toContain('arguments of command "charge_keyed"');
    await expect(runs.approve(run.id, 'no-such-key', { by: 'x' })).rejects.toBeInstanceOf(
      CommandNotFoundError,
    );
    await expect(runs.resolveCommand('no-such-key', { outcome: 'retry' })).rejects.toBeInstanceOf(
      CommandNotFoundError,
    );
    await expect(runs.signal(run.id, 'x')).rejects.toBeInstanceOf(InvalidRunStateError);
    await expect(runs.signal(run.id, 'x', { n: 1n })).rejects.toBeInstanceOf(SerializationError);
  });
});
