import { INestApplication, Injectable } from '@nestjs/common';
import {
  CommandContext,
  DurableWorkflow,
  IdempotentCommand,
  NonRetryableError,
  RunContext,
  RunRepository,
} from '../../src';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil } from '../helpers/drive';

/**
 * Issue 35, part D: an error the engine throws from the run's record (a signal wait's timeout, a
 * command's recorded failure, a child run's recorded end) is thrown again by every retry of the run,
 * which replays the same record. Uncaught, it fails the run once. Before, the run was retried
 * `maxAttempts` times (each claim replaying the same outcome) and dead-lettered.
 */
let refusals = 0;

@Injectable()
class Vendor {
  @IdempotentCommand({ name: 'refuse', inDoubt: 'retry-with-key' })
  async refuse(_args: Record<string, never>, _ctx?: CommandContext) {
    refusals++;
    throw new NonRetryableError('card declined');
  }
}

@DurableWorkflow('rf-child', { maxAttempts: 1 })
class FailingChild {
  async run() {
    throw new NonRetryableError('the child gave up');
  }
}

@DurableWorkflow('rf', { maxAttempts: 5 })
class RecordedFailure {
  constructor(private readonly vendor: Vendor) {}
  async run(input: { shape: 'timeout' | 'command' | 'child' }, ctx: RunContext) {
    if (input.shape === 'timeout') return ctx.waitForSignal('approve', { timeoutMs: 50 });
    if (input.shape === 'command') return this.vendor.refuse({});
    return ctx.waitForChild(await ctx.startChild(FailingChild, {}));
  }
}

describe('an uncaught outcome from the record fails the run once (issue 35 D)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let runs: RunRepository;

  beforeAll(async () => {
    db = await createTestDatabase('recorded_failures');
    app = await bootApp(db.url, [Vendor, FailingChild, RecordedFailure]);
    runs = app.get(RunRepository);
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  const count = async (id: string, type: string) =>
    (
      await db.query(`select count(*)::int as n from ai_events where run_id = $1 and event_type = $2`, [
        id,
        type,
      ])
    )[0].n as number;

  it.each([
    ['timeout', 'SignalTimeoutError', 'DURABLE_SIGNAL_TIMEOUT'],
    ['command', 'CommandFailedError', 'DURABLE_COMMAND_FAILED'],
    ['child', 'ChildRunError', 'DURABLE_CHILD_RUN_FAILED'],
  ] as const)('%s: failed at once with reason recorded, no retry', async (shape, name, code) => {
    const { run } = await runs.start(RecordedFailure, { shape });
    const ended = await driveUntil(app, db, run.id);
    expect(ended.status).toBe('failed');
    expect(ended.error).toMatchObject({ name, code });
    const [failed] = await db.query(
      `select payload from ai_events where run_id = $1 and event_type = 'run.failed'`,
      [run.id],
    );
    expect(failed.payload.reason).toBe('recorded');
    expect(await count(run.id, 'run.retry_scheduled')).toBe(0);
    expect(await count(run.id, 'run.dead_lettered')).toBe(0);
  });

  it('the refused command was sent once', () => {
    expect(refusals).toBe(1);
  });
});
