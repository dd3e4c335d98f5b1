import { INestApplication, Injectable } from '@nestjs/common';
import {
  DurableStep,
  DurableUsageError,
  DurableWorkflow,
  InvalidArgumentError,
  NoWorkerForKindError,
  RunRepository,
} from '../../src';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil } from '../helpers/drive';

/**
 * Programming errors fail once (issue 45 part 3): a usage or configuration error fails the run at its
 * first claim, not after `maxAttempts` claims and a dead letter; a step's body is not retried on one.
 * Errors that can be transient are still retried.
 */
let stepCalls = 0;

@Injectable()
class UsageSteps {
  @DurableStep({ retry: { maxAttempts: 5, initialDelayMs: 1 } })
  async misconfigured() {
    stepCalls++;
    throw new InvalidArgumentError('threshold', 'must be a number, got "high"');
  }
}

@DurableWorkflow('usage-in-run', { maxAttempts: 20 })
class UsageInRun {
  async run() {
    throw new DurableUsageError('compile the graph with a DurablePostgresSaver (as LangGraph says)');
  }
}

@DurableWorkflow('usage-in-step', { maxAttempts: 20 })
class UsageInStep {
  constructor(private readonly steps: UsageSteps) {}
  async run() {
    return this.steps.misconfigured();
  }
}

@DurableWorkflow('transient-engine-error', { maxAttempts: 2 })
class TransientEngineError {
  async run() {
    throw new NoWorkerForKindError('some-kind');
  }
}

describe('programming errors fail once', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let runs: RunRepository;
  beforeAll(async () => {
    db = await createTestDatabase('usage_errors');
    app = await bootApp(db.url, [UsageSteps, UsageInRun, UsageInStep, TransientEngineError], {
      reconciler: { enabled: false, backoffBaseMs: 1, backoffMaxMs: 2 },
    });
    runs = app.get(RunRepository);
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  const claims = async (id: string) =>
    (
      await db.query(
        `select count(*)::int as n from ai_events where run_id = $1 and event_type = 'run.claimed'`,
        [id],
      )
    )[0].n as number;

  it('a DurableUsageError thrown by run() fails the run at its first claim', async () => {
    const { run } = await runs.start('usage-in-run', {});
    const done = await driveUntil(app, db, run.id);
    expect(done.status).toBe('failed');
    expect(done.error?.code).toBe('DURABLE_MISUSE');
    expect(await claims(run.id)).toBe(1);
    const failed = await db.query(
      `select payload from ai_events where run_id = $1 and event_type = 'run.failed'`,
      [run.id],
    );
    expect(failed[0].payload.reason).toBe('usage');
  });

  it("a step's body that throws a programming error runs once, and the run fails", async () => {
    stepCalls = 0;
    const { run } = await runs.start('usage-in-step', {});
    const done = await driveUntil(app, db, run.id);
    expect(done.status).toBe('failed');
    expect(stepCalls).toBe(1);
    expect(await claims(run.id)).toBe(1);
  });

  it('an engine error that can be transient is still retried (dead-lettered after its attempts)', async () => {
    const { run } = await runs.start('transient-engine-error', {});
    const done = await driveUntil(app, db, run.id);
    expect(done.status).toBe('dead_lettered');
    expect(await claims(run.id)).toBe(2);
  });
});
