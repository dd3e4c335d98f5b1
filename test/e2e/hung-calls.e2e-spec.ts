import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { INestApplication, Injectable } from '@nestjs/common';
import {
  currentRun,
  DurableStep,
  DurableWorkflow,
  IdempotentCommand,
  RunContext,
  RunRepository,
  StepTimeoutError,
} from '../../src';
import { DurableWorker } from '../../src/engine/worker.service';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil, gate } from '../helpers/drive';
import { waitFor } from '../helpers/processes';

/**
 * A hung call never holds a run (issue 45 part 1): a step body that never settles is given up on at its
 * `timeoutMs` (its attempt's `ctx.signal` fires, its requests are refused, its late result is dropped),
 * and once the run stops (a cancel) a body that ignores its signal is abandoned after a grace, so the run
 * ends. On 834a499 each of these runs stayed `running` for as long as one watched.
 */
const never = new Promise<never>(() => undefined);
const seen = { aborted: [] as unknown[], reached: gate(), commandReached: gate(), lateSent: 0 };
let target = '';

@Injectable()
class HungSteps {
  @DurableStep({ name: 'hangs', timeoutMs: 300, retry: { maxAttempts: 2, initialDelayMs: 1 } })
  async hangs() {
    const signal = currentRun()!.signal;
    signal.addEventListener('abort', () => seen.aborted.push(signal.reason));
    await never;
  }

  @DurableStep({ name: 'hangs-then-sends', timeoutMs: 200, retry: { maxAttempts: 1 } })
  async hangsThenSends() {
    await new Promise((r) => setTimeout(r, 600)); // ignores its signal, then sends after its timeout
    await fetch(`${target}/late`, { method: 'POST', body: 'x' });
    return 'sent';
  }

  @DurableStep({ name: 'hangs-forever' })
  async hangsForever() {
    seen.reached.open();
    await never;
  }

  @IdempotentCommand({ name: 'hung_charge', inDoubt: 'retry-with-key' })
  async hungCharge(_args: { amount: number }) {
    seen.commandReached.open();
    await never;
  }

  @DurableStep({ name: 'quick' })
  async quick() {
    return 'quick';
  }
}

@DurableWorkflow('hung-timeout')
class HungTimeout {
  constructor(private readonly steps: HungSteps) {}
  async run() {
    try {
      await this.steps.hangs();
      return 'finished';
    } catch (err) {
      return err instanceof StepTimeoutError ? 'timed out' : `other: ${String(err)}`;
    }
  }
}

@DurableWorkflow('hung-race')
class HungRace {
  constructor(private readonly steps: HungSteps) {}
  async run(_input: unknown, ctx: RunContext) {
    const winner = await Promise.race([
      this.steps.hangs().then(() => 'step'),
      ctx.sleep(50).then(() => 'sleep'),
    ]);
    return { winner, after: await this.steps.quick() };
  }
}

@DurableWorkflow('hung-late-send')
class HungLateSend {
  constructor(private readonly steps: HungSteps) {}
  async run() {
    return this.steps.hangsThenSends().catch((err) => `failed: ${(err as Error).name}`);
  }
}

@DurableWorkflow('hung-command-cancel')
class HungCommandCancel {
  constructor(private readonly steps: HungSteps) {}
  async run() {
    return this.steps.hungCharge({ amount: 5 });
  }
}

@DurableWorkflow('hung-cancel')
class HungCancel {
  constructor(private readonly steps: HungSteps) {}
  async run() {
    return this.steps.hangsForever();
  }
}

describe('a hung call never holds a run', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let runs: RunRepository;
  let server: http.Server;
  const received: string[] = [];

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        received.push(req.url!);
        res.end('ok');
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    target = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    db = await createTestDatabase('hung_calls');
    app = await bootApp(
      db.url,
      [HungSteps, HungTimeout, HungRace, HungLateSend, HungCancel, HungCommandCancel],
      {
        worker: { enabled: false }, // no heartbeat timer: the default lease (30 s) outlasts every grace here
      },
    );
    runs = app.get(RunRepository);
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  it('a step that never settles, with timeoutMs: its attempts time out, their signals fire, the run finishes', async () => {
    seen.aborted = [];
    const { run } = await runs.start('hung-timeout', {});
    const done = await driveUntil(app, db, run.id);
    expect(done.status).toBe('succeeded');
    expect(done.output).toBe('timed out');
    expect(seen.aborted).toHaveLength(2); // each attempt's signal, with the timeout as its reason
    expect(seen.aborted.every((r) => r instanceof StepTimeoutError)).toBe(true);
  });

  it("a race's hung loser is given up on: the run ends with the winner's result", async () => {
    const { run } = await runs.start('hung-race', {});
    const done = await driveUntil(app, db, run.id);
    expect(done.status).toBe('succeeded');
    expect(done.output).toEqual({ winner: 'sleep', after: 'quick' });
  });

  it('an abandoned body that sends after its timeout sends nothing; its late result is dropped', async () => {
    received.splice(0);
    const { run } = await runs.start('hung-late-send', {});
    const done = await driveUntil(app, db, run.id);
    expect(done.status).toBe('succeeded');
    expect(done.output).toBe('failed: StepTimeoutError');
    await new Promise((r) => setTimeout(r, 800));
    expect(received).toEqual([]);
  });

  it('cancel() ends a run whose step hangs without a timeout, within the stop grace', async () => {
    const worker = app.get(DurableWorker);
    const { run } = await runs.start('hung-cancel', {});
    void worker.tick();
    await seen.reached.promise;
    await runs.cancel(run.id, 'hung');
    await worker.heartbeat(); // as the heartbeat timer would: it finds the cancel request
    await waitFor(
      async () => (await runs.get(run.id))!.status === 'cancelled',
      10_000,
      'the run to end cancelled',
    );
    await worker.idle();
  }, 20_000);

  it('cancel() ends a run whose command body hangs; the command stays in doubt', async () => {
    const worker = app.get(DurableWorker);
    const { run } = await runs.start('hung-command-cancel', {});
    void worker.tick();
    await seen.commandReached.promise;
    await runs.cancel(run.id, 'hung command');
    await worker.heartbeat();
    await waitFor(
      async () => (await runs.get(run.id))!.status === 'cancelled',
      10_000,
      'the run to end cancelled',
    );
    await worker.idle();
    const [cmd] = await db.query(`select status from ai_commands where run_id = $1`, [run.id]);
    expect(cmd.status).not.toBe('succeeded'); // its outcome unknown: never recorded as an effect
  }, 20_000);
});
