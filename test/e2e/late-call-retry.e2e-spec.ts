import { INestApplication, Injectable } from '@nestjs/common';
import { DurableStep, DurableWorkflow, RunContext, RunRepository } from '../../src';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil } from '../helpers/drive';

/**
 * A step whose attempt timed out while its body ignores its signal waits up to 5 s before its next
 * attempt. Meanwhile `worker.lateCallGraceMs` may give up on the call (a race's loser, run() returned).
 * Found by the differential test (issue 45 part 6): the next attempt still started after the bound (its
 * body ran, to be given up on at once), and its timeout promise, left without a handler as its signal
 * had already fired, rejected unhandled 200 ms later (a worker process without an `unhandledRejection`
 * handler exits on that). Now no attempt starts then, and nothing rejects unhandled.
 */
const seen = { bodies: 0 };
const never = new Promise<never>(() => undefined);

@Injectable()
class Steps {
  @DurableStep({ name: 'deaf-loser', timeoutMs: 200, retry: { maxAttempts: 2, initialDelayMs: 1 } })
  async deafLoser() {
    seen.bodies++;
    await never; // ignores its signal
  }
}

@DurableWorkflow('late-call-retry')
class LateRetry {
  constructor(private readonly steps: Steps) {}
  async run(_input: unknown, ctx: RunContext) {
    return Promise.race([this.steps.deafLoser().then(() => 'step'), ctx.sleep(50).then(() => 'sleep')]);
  }
}

describe('a retry waiting when the late-call bound gives up on its step', () => {
  let db: TestDatabase;
  let app: INestApplication;
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);

  beforeAll(async () => {
    process.on('unhandledRejection', onUnhandled);
    db = await createTestDatabase('late_call_retry');
    app = await bootApp(db.url, [Steps, LateRetry], {
      worker: { enabled: false, lateCallGraceMs: 300 },
    });
  });
  afterAll(async () => {
    process.off('unhandledRejection', onUnhandled);
    await app?.close();
    await db?.drop();
  });

  it('after the late-call bound: no next attempt, no rejection unhandled', async () => {
    const { run } = await app.get(RunRepository).start('late-call-retry', {});
    const done = await driveUntil(app, db, run.id);
    expect(done.status).toBe('succeeded');
    expect(done.output).toBe('sleep');
    await new Promise((r) => setTimeout(r, 500)); // past a next attempt's timeout
    expect(seen.bodies).toBe(1);
    expect(unhandled).toEqual([]);
  }, 20_000);
});
