import { INestApplication, Injectable } from '@nestjs/common';
import { DurableStep, DurableWorkflow, RunContext, RunRepository } from '../../src';
import { DurableWorker } from '../../src/engine/worker.service';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { gate } from '../helpers/drive';
import { waitFor } from '../helpers/processes';

/**
 * A cancel requested while a busy run waits (a step of it runs beside a sleep): the
 * statement that settles the wait finds the request, and the wait rejects with RunCancelledError
 * (docs/API.md: pending waits reject) and records nothing. Before, that statement recorded and delivered
 * the timer (or a signal) and the
 * code after the wait ran once more (the run stopped only at its next call): the differential test
 * (issue 45 part 6) found it through a `finally` block that plain JavaScript never reaches.
 */
const held = gate();
const reached = gate();
const seen = { after: 0, caught: [] as string[], finally: 0 };

@Injectable()
class SlowSteps {
  @DurableStep({ name: 'slow' })
  async slow() {
    reached.open();
    await held.promise;
    return 'slow';
  }
}

@DurableWorkflow('cbw-sleep')
class BusySleep {
  constructor(private readonly steps: SlowSteps) {}
  async run(_input: unknown, ctx: RunContext) {
    const slow = this.steps.slow();
    try {
      await ctx.sleep(400);
      seen.after++;
    } catch (err) {
      seen.caught.push((err as Error).name);
    } finally {
      seen.finally++;
    }
    return slow;
  }
}

describe('a cancel found by the statement that settles a busy run’s wait', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let runs: RunRepository;

  beforeAll(async () => {
    db = await createTestDatabase('cancel_busy_wait');
    // No heartbeat timer: only the wait's statement can find the cancel while the step runs.
    app = await bootApp(db.url, [SlowSteps, BusySleep], { worker: { enabled: false } });
    runs = app.get(RunRepository);
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('a timer that comes due after the cancel rejects the sleep: the code after it never runs', async () => {
    const worker = app.get(DurableWorker);
    const { run } = await runs.start('cbw-sleep', {});
    void worker.tick();
    await reached.promise;
    await new Promise((r) => setTimeout(r, 100)); // the sleep's registration was settled
    await runs.cancel(run.id, 'busy'); // nothing tells the worker: the sleep's statement finds it
    await new Promise((r) => setTimeout(r, 600)); // the sleep's statement has run by now
    expect(seen).toEqual({ after: 0, caught: ['RunCancelledError'], finally: 1 });
    held.open();
    await waitFor(async () => (await runs.get(run.id))!.status === 'cancelled', 10_000, 'the run cancelled');
    await worker.idle();
    // Nothing was settled: the record holds no firing the code never saw (a replay sees what it saw).
    const fired = await db.query(
      `select step_name from ai_checkpoints where run_id = $1 and step_name = '$sleep'`,
      [run.id],
    );
    expect(fired).toEqual([]);
  });
});
