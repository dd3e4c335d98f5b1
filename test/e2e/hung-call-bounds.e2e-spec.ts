import { INestApplication, Injectable, Logger } from '@nestjs/common';
import {
  CallAbandonedError,
  currentRun,
  DurableStep,
  DurableTransaction,
  DurableTransactionHost,
  DurableWorkflow,
  IdempotentCommand,
  RunContext,
  RunRepository,
  StepTimeoutError,
} from '../../src';
import type { CommandContext } from '../../src';
import { abandonedBodies } from '../../src/engine/live-calls';
import { DurableWorker } from '../../src/engine/worker.service';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil, gate } from '../helpers/drive';
import { waitFor } from '../helpers/processes';
import { TRAIL } from '../helpers/event-trail';

/**
 * Every durable call is bounded (issue 45 part 1): a step, a command or a transaction without its own
 * `timeoutMs` gets the module's `defaultTimeoutMs`; a call still live when `run()` returned (a race's
 * loser) is abandoned after `worker.lateCallGraceMs`, so the run ends; a transaction body that hangs is
 * abandoned at its timeout or at a stop like a step's. Before, each of these runs stayed `running`.
 */
const never = new Promise<never>(() => undefined);
const seen = {
  reasons: [] as unknown[],
  sends: [] as string[],
  txAttempts: 0,
  txReached: gate(),
};

/** Records why an attempt's signal fired. */
function watchSignal(signal: AbortSignal): void {
  signal.addEventListener('abort', () => seen.reasons.push(signal.reason));
}

@Injectable()
class Calls {
  constructor(private readonly tx: DurableTransactionHost) {}

  @DurableStep({ name: 'untimed', timeoutMs: 0 })
  async untimed() {
    watchSignal(currentRun()!.signal);
    await never;
  }

  @DurableStep({ name: 'default-timed', retry: { maxAttempts: 1 } })
  async defaultTimed() {
    watchSignal(currentRun()!.signal);
    await never;
  }

  @IdempotentCommand({ name: 'untimed_send', inDoubt: 'retry-with-key', timeoutMs: 0 })
  async untimedSend(_args: { n: number }, ctx?: CommandContext) {
    watchSignal(ctx!.signal);
    await never;
  }

  @IdempotentCommand({
    name: 'flaky_send',
    inDoubt: 'retry-with-key',
    timeoutMs: 200,
    retry: { maxAttempts: 2, initialDelayMs: 1 },
  })
  async flakySend(_args: { n: number }, ctx?: CommandContext) {
    seen.sends.push(ctx!.idempotencyKey);
    if (seen.sends.length === 1) {
      watchSignal(ctx!.signal);
      await never; // the first send never answers
    }
    return 'sent';
  }

  @DurableTransaction({ name: 'tx-hangs-once', timeoutMs: 200, retry: { maxAttempts: 2, initialDelayMs: 1 } })
  async txHangsOnce() {
    await this.tx.client.query('select 1');
    if (++seen.txAttempts === 1) await never; // ignores everything, outside any statement
    return 'committed';
  }

  @DurableTransaction({ name: 'tx-untimed', timeoutMs: 0 })
  async txUntimed() {
    await this.tx.client.query('select 1');
    seen.txReached.open();
    await never;
  }
}

@DurableWorkflow('bound-race-step')
class RaceStep {
  constructor(private readonly calls: Calls) {}
  async run(_input: unknown, ctx: RunContext) {
    return Promise.race([this.calls.untimed().then(() => 'step'), ctx.sleep(50).then(() => 'sleep')]);
  }
}

@DurableWorkflow('bound-race-command')
class RaceCommand {
  constructor(private readonly calls: Calls) {}
  async run(_input: unknown, ctx: RunContext) {
    return Promise.race([this.calls.untimedSend({ n: 1 }), ctx.sleep(50).then(() => 'sleep')]);
  }
}

@DurableWorkflow('bound-default')
class DefaultTimeout {
  constructor(private readonly calls: Calls) {}
  async run() {
    return this.calls
      .defaultTimed()
      .catch((err) => (err instanceof StepTimeoutError ? 'timed out' : 'other'));
  }
}

@DurableWorkflow('bound-command-timeout')
class CommandTimeout {
  constructor(private readonly calls: Calls) {}
  async run() {
    return this.calls.flakySend({ n: 2 });
  }
}

@DurableWorkflow('bound-tx-timeout')
class TxTimeout {
  constructor(private readonly calls: Calls) {}
  async run() {
    return this.calls.txHangsOnce();
  }
}

@DurableWorkflow('bound-tx-cancel')
class TxCancel {
  constructor(private readonly calls: Calls) {}
  async run() {
    return this.calls.txUntimed();
  }
}

const WORKFLOWS = [RaceStep, RaceCommand, DefaultTimeout, CommandTimeout, TxTimeout, TxCancel];

describe('every durable call is bounded', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let runs: RunRepository;
  let warned: string[] = [];

  beforeAll(async () => {
    db = await createTestDatabase('hung_bounds');
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(function (this: Logger, m: unknown) {
      warned.push(String(m));
    });
    app = await bootApp(db.url, [Calls, ...WORKFLOWS], {
      defaultTimeoutMs: 300,
      worker: { enabled: false, lateCallGraceMs: 400 },
    });
    warn.mockRestore();
    runs = app.get(RunRepository);
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });
  beforeEach(() => (seen.reasons = []));

  it("a race's loser without a timeout is abandoned after lateCallGraceMs: the run ends, the failure recorded", async () => {
    const running = abandonedBodies.running;
    const { run } = await runs.start('bound-race-step', {});
    const done = await driveUntil(app, db, run.id);
    expect(done).toMatchObject({ status: 'succeeded', output: 'sleep' });
    expect(abandonedBodies.running).toBe(running + 1); // it never settles: the gauge keeps it
    expect(seen.reasons).toHaveLength(1);
    expect(seen.reasons[0]).toBeInstanceOf(CallAbandonedError);
    const failed = await db.query(
      `select payload from ${TRAIL} t where run_id = $1 and event_type = 'step.failed'`,
      [run.id],
    );
    expect(failed.map((e) => e.payload.name)).toEqual(['untimed']);
    expect(failed[0].payload.error).toContain('after run() returned');
  });

  it("a command as a race's loser is abandoned the same way and stays in doubt, never recorded as an effect", async () => {
    const { run } = await runs.start('bound-race-command', {});
    const done = await driveUntil(app, db, run.id);
    expect(done).toMatchObject({ status: 'succeeded', output: 'sleep' });
    expect(seen.reasons[0]).toBeInstanceOf(CallAbandonedError);
    const [cmd] = await db.query(`select status from ai_commands where run_id = $1`, [run.id]);
    expect(cmd.status).toBe('pending');
  });

  it("a step without timeoutMs gets the module's defaultTimeoutMs", async () => {
    const { run } = await runs.start('bound-default', {});
    const done = await driveUntil(app, db, run.id);
    expect(done).toMatchObject({ status: 'succeeded', output: 'timed out' });
    expect(seen.reasons).toHaveLength(1);
    expect(seen.reasons[0]).toBeInstanceOf(StepTimeoutError);
  });

  it('a command past its timeoutMs is given up on (its signal fires) and sent again with the same key', async () => {
    seen.sends = [];
    const { run } = await runs.start('bound-command-timeout', {});
    const done = await driveUntil(app, db, run.id);
    expect(done).toMatchObject({ status: 'succeeded', output: 'sent' });
    expect(seen.sends).toHaveLength(2);
    expect(new Set(seen.sends).size).toBe(1);
    expect(seen.reasons[0]).toBeInstanceOf(StepTimeoutError);
  });

  it('a transaction body that hangs past its timeout does not hold the next attempt for ever', async () => {
    seen.txAttempts = 0;
    const { run } = await runs.start('bound-tx-timeout', {});
    const done = await driveUntil(app, db, run.id);
    expect(done).toMatchObject({ status: 'succeeded', output: 'committed' });
    expect(seen.txAttempts).toBe(2);
  }, 20_000);

  it('cancel() ends a run whose transaction body hangs without a timeout, within the stop grace', async () => {
    const worker = app.get(DurableWorker);
    const { run } = await runs.start('bound-tx-cancel', {});
    void worker.tick();
    await seen.txReached.promise;
    await runs.cancel(run.id, 'hung transaction');
    await worker.heartbeat();
    await waitFor(async () => (await runs.get(run.id))!.status === 'cancelled', 10_000, 'the run cancelled');
    await worker.idle();
  }, 20_000);

  it('with defaultTimeoutMs 0, boot names every call that has no timeout at all', async () => {
    warned = [];
    const other = await createTestDatabase('hung_bounds_warn');
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(function (this: Logger, m: unknown) {
      warned.push(String(m));
    });
    const quiet = await bootApp(other.url, [Calls], { defaultTimeoutMs: 0, worker: { enabled: false } });
    warn.mockRestore();
    await quiet.close();
    await other.drop();
    const line = warned.find((m) => m.includes('no timeout'));
    expect(line).toContain('@DurableStep default-timed');
    expect(line).not.toContain('untimed'); // said so explicitly (timeoutMs: 0)
    expect(line).not.toContain('flaky_send');
  });
});
