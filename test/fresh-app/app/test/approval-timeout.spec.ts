import 'reflect-metadata';
import { INestApplicationContext, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import {
  DurableExecutionModule,
  DurableWorkflow,
  RunRepository,
  SignalTimeoutError,
} from 'nestjs-durable-execution';
import type { RunContext } from 'nestjs-durable-execution';
import { advanceTestClock, driveRun, resetTestClock } from 'nestjs-durable-execution/testing';

const DAY = 24 * 3600_000;

/** Waits a day, then three days for a human; no answer means no. */
@DurableWorkflow('approval')
class ApprovalWorkflow {
  async run(_input: unknown, ctx: RunContext): Promise<{ approved: boolean }> {
    await ctx.sleep(DAY);
    try {
      return await ctx.waitForSignal<{ approved: boolean }>('decision', { timeoutMs: 3 * DAY });
    } catch (err) {
      if (err instanceof SignalTimeoutError) return { approved: false };
      throw err;
    }
  }
}

@Module({
  imports: [
    DurableExecutionModule.forRoot({
      database: { url: process.env.DATABASE_URL! },
      worker: { enabled: false },
      reconciler: { enabled: false },
    }),
  ],
  providers: [ApprovalWorkflow],
})
class TestModule {}

describe('an approval that times out after three days, in milliseconds (the test clock)', () => {
  let app: INestApplicationContext;
  beforeAll(async () => {
    app = await NestFactory.createApplicationContext(TestModule, { logger: ['error'] });
  });
  afterEach(() => resetTestClock());
  afterAll(async () => {
    await app?.close();
  });

  it('skips the 24 h sleep and the 3-day timeout', async () => {
    const t0 = Date.now();
    const { run } = await app.get(RunRepository).start(ApprovalWorkflow, {});
    expect((await driveRun(app, run.id, ['waiting'])).parkedReason).toBe('sleeping');
    await advanceTestClock(app, DAY);
    expect((await driveRun(app, run.id, ['waiting'])).parkedReason).toBe('waiting for signal "decision"');
    await advanceTestClock(app, 3 * DAY);
    const done = await driveRun(app, run.id);
    expect(done.status).toBe('succeeded');
    expect(done.output).toEqual({ approved: false });
    expect(Date.now() - t0).toBeLessThan(10_000);
  });
});
