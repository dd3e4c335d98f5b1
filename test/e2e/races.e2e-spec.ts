import { INestApplication, Injectable } from '@nestjs/common';
import { DurableStep, DurableWorkflow, RunContext, RunRepository, RunView } from '../../src';
import { replayRuns } from '../../src/testing';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { waitFor } from '../helpers/processes';

/**
 * Issue 35, part B: races and timeouts inside a run mean what their JavaScript says. Before, a wait
 * parked the run by itself: `Promise.race([ctx.waitForSignal('approve'), ctx.sleep(1500)])` with no
 * signal stayed `waiting` forever, a sleep raced against a step only fired after the step, and a signal
 * raced against a step was never taken while the step ran. Real workers (timers on); each case asserts
 * the winner and that the run ended before the loser's time would have come.
 */
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

@Injectable()
class Tools {
  @DurableStep({ name: 'tool', kind: 'tool' })
  async tool(ms: number) {
    await sleep(ms);
    return { tool: ms };
  }
  @DurableStep({ name: 'think', kind: 'model' })
  async think(ms: number) {
    await sleep(ms);
    return { answer: ms };
  }
}

type Shape =
  | { t: 'signal-vs-sleep'; sleepMs: number; signalFirst: boolean }
  | { t: 'tool-vs-sleep'; toolMs: number; sleepMs: number }
  | { t: 'model-vs-deadline'; modelMs: number; sleepMs: number }
  | { t: 'tool-vs-signal'; toolMs: number }
  | { t: 'all-then-timer'; toolMs: number; sleepMs: number }
  | { t: 'sleep-awaited-later'; sleepMs: number; toolMs: number };

@DurableWorkflow('races')
class Races {
  constructor(private readonly tools: Tools) {}
  async run(s: Shape, ctx: RunContext) {
    const timeout = (ms: number) => ctx.sleep(ms).then(() => 'timeout' as const);
    switch (s.t) {
      case 'signal-vs-sleep': {
        const signal = ctx.waitForSignal<{ by: string }>('approve');
        return s.signalFirst
          ? Promise.race([signal, timeout(s.sleepMs)])
          : Promise.race([timeout(s.sleepMs), signal]);
      }
      case 'tool-vs-sleep':
        return Promise.race([this.tools.tool(s.toolMs), timeout(s.sleepMs)]);
      case 'model-vs-deadline':
        return Promise.race([this.tools.think(s.modelMs), timeout(s.sleepMs)]);
      case 'tool-vs-signal':
        return Promise.race([this.tools.tool(s.toolMs), ctx.waitForSignal('stop')]);
      case 'all-then-timer': {
        const [a] = await Promise.all([this.tools.tool(s.toolMs), timeout(s.sleepMs)]);
        return a;
      }
      case 'sleep-awaited-later': {
        const t = ctx.sleep(s.sleepMs);
        const a = await this.tools.tool(s.toolMs);
        await t;
        return a;
      }
    }
  }
}

describe('races and timeouts inside a run (issue 35 B)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let runs: RunRepository;

  beforeAll(async () => {
    db = await createTestDatabase('races');
    app = await bootApp(db.url, [Tools, Races], {
      worker: { enabled: true, pollIntervalMs: 50, heartbeatMs: 1000, leaseTtlMs: 10_000 },
    });
    runs = app.get(RunRepository);
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  /** Runs `shape` to its end; its output and how long it took from start to finish (ms). */
  async function race(
    shape: Shape,
    during?: (id: string) => Promise<void>,
  ): Promise<{ out: unknown; ms: number }> {
    const { run } = await runs.start(Races, shape);
    if (during) await during(run.id);
    let ended: RunView | null = null;
    await waitFor(
      async () => ((ended = await runs.get(run.id)), ['succeeded', 'failed'].includes(ended!.status)),
      15_000,
      `run ${JSON.stringify(shape)} to end`,
    );
    const v = ended! as RunView;
    expect(v.status).toBe('succeeded');
    return { out: v.output, ms: v.finishedAt!.getTime() - v.createdAt.getTime() };
  }

  it.each([true, false])(
    'a signal wait raced against a sleep, no signal: the sleep wins (signal first in the race: %s)',
    async (signalFirst) => {
      const { out, ms } = await race({ t: 'signal-vs-sleep', sleepMs: 1500, signalFirst });
      expect(out).toBe('timeout');
      expect(ms).toBeLessThan(5000);
    },
  );

  it.each([true, false])(
    'a signal at 1 s raced against a 6 s sleep: the signal wins at once (signal first in the race: %s)',
    async (signalFirst) => {
      const { out, ms } = await race({ t: 'signal-vs-sleep', sleepMs: 6000, signalFirst }, async (id) => {
        await sleep(1000);
        await runs.signal(id, 'approve', { by: 'ann' });
      });
      expect(out).toEqual({ by: 'ann' });
      expect(ms).toBeLessThan(5000);
    },
  );

  it('a 200 ms tool raced against a 4 s timeout: the tool wins, the run ends before the timeout', async () => {
    const { out, ms } = await race({ t: 'tool-vs-sleep', toolMs: 200, sleepMs: 4000 });
    expect(out).toEqual({ tool: 200 });
    expect(ms).toBeLessThan(3500);
  });

  it('a 5 s tool raced against a 1.5 s timeout: the timeout wins while the tool runs', async () => {
    const { run } = await runs.start(Races, { t: 'tool-vs-sleep', toolMs: 5000, sleepMs: 1500 });
    // The timeout is recorded (and reaches the workflow) while the tool still runs.
    await waitFor(
      async () =>
        (await db.query(`select 1 from ai_checkpoints where run_id = $1 and step_name = '$sleep'`, [run.id]))
          .length === 1,
      4500,
      'the timeout to fire while the tool runs',
    );
    const tool = await db.query(`select 1 from ai_checkpoints where run_id = $1 and step_name = 'tool'`, [
      run.id,
    ]);
    expect(tool).toHaveLength(0);
    const { out } = await race({ t: 'tool-vs-sleep', toolMs: 5000, sleepMs: 1500 });
    expect(out).toBe('timeout');
  });

  it('a 600 ms model call raced against a 300 ms deadline: the deadline wins', async () => {
    const { out } = await race({ t: 'model-vs-deadline', modelMs: 600, sleepMs: 300 });
    expect(out).toBe('timeout');
  });

  it('a 300 ms tool raced against a signal wait: the tool wins, the run does not wait', async () => {
    const { out, ms } = await race({ t: 'tool-vs-signal', toolMs: 300 });
    expect(out).toEqual({ tool: 300 });
    expect(ms).toBeLessThan(3000);
  });

  it('a signal raced against a running 4 s tool: the signal is taken while the tool runs', async () => {
    let id = '';
    const { out, ms } = await race({ t: 'tool-vs-signal', toolMs: 4000 }, async (runId) => {
      id = runId;
      await sleep(800);
      await runs.signal(runId, 'stop', { now: true });
    });
    expect(out).toEqual({ now: true });
    // The race's loser (the tool) was let finish and recorded before the run ended, after the signal.
    const order = await db.query(
      `select step_name from ai_checkpoints where run_id = $1 and seq is not null order by seq`,
      [id],
    );
    expect(order.map((r: { step_name: string }) => r.step_name)).toEqual(['$signal:stop', 'tool']);
    expect(ms).toBeGreaterThanOrEqual(4000);
  });

  it('Promise.all of a tool and a timer, and a sleep awaited after a tool', async () => {
    expect((await race({ t: 'all-then-timer', toolMs: 100, sleepMs: 700 })).out).toEqual({ tool: 100 });
    expect((await race({ t: 'sleep-awaited-later', sleepMs: 300, toolMs: 800 })).out).toEqual({ tool: 800 });
    expect((await race({ t: 'sleep-awaited-later', sleepMs: 900, toolMs: 100 })).out).toEqual({ tool: 100 });
  });

  it('every finished run replays as it ran (the record decides each race the same way)', async () => {
    const results = await replayRuns(app, { kind: 'races', limit: 100 });
    expect(results.length).toBeGreaterThan(5);
    expect(results.filter((r) => r.problems.length)).toEqual([]);
  });
});
