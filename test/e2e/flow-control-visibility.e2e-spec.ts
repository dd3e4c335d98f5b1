import { INestApplication, Injectable } from '@nestjs/common';
import { Client } from 'pg';
import { DurableCron, DurableStep, DurableWorkflow, RunRepository } from '../../src';
import { DurableObservabilityModule } from '../../src/observability';
import { DurableWorker } from '../../src/engine/worker.service';
import { ScheduleRunner } from '../../src/maintenance/schedule-runner.service';
import { DurableMetrics } from '../../src/observability/durable-metrics.service';
import { DEFAULT_NAMES } from '../../src/store/durable-names';
import { BACKLOG_SQL, RunStatsReader } from '../../src/store/run-stats.reader';
import { CLAIM_RUNS_SQL } from '../../src/store/run-state/claim-runs';
import { CLAIM_LIMITED_SQL } from '../../src/store/run-state/claim-limited';
import { bootModules, durableModule } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { gate } from '../helpers/drive';

const hold = gate();

@Injectable()
class VisSteps {
  @DurableStep()
  async wait() {
    await hold.promise;
    return 1;
  }
}

@DurableWorkflow('vis-limited', { concurrency: 1 })
class VisLimited {
  constructor(private readonly s: VisSteps) {}
  async run() {
    return this.s.wait();
  }
}

@DurableCron('0 0 1 1 *', { name: 'vis-cron' })
@DurableWorkflow('vis-cron')
class VisCron {
  async run() {
    return 1;
  }
}

/** Issue 21, item 5: the backlog per kind, runs held back by each limit, schedules, in stats and metrics. */
describe('flow control, visible: stats and metrics', () => {
  let db: TestDatabase;
  let app: INestApplication;

  beforeAll(async () => {
    db = await createTestDatabase('flowvis');
    app = await bootModules({
      imports: [
        durableModule(db.url),
        DurableObservabilityModule.forRoot({ metrics: { snapshotTtlMs: 0 }, health: false }),
      ],
      providers: [VisSteps, VisLimited, VisCron],
    });
  });
  afterAll(async () => {
    hold.open();
    await app?.get(DurableWorker).idle();
    await app?.close();
    await db?.drop();
  });

  it('reports held runs apart from the due backlog, the backlog by kind, and each schedule', async () => {
    const runs = app.get(RunRepository);
    for (let i = 0; i < 3; i++) await runs.start('vis-limited', { i });
    await runs.start('vis-cron', {}); // due, and no worker here claims it (the kind is registered: tick() does)
    await app.get(ScheduleRunner).tick();
    await app.get(DurableWorker).tick(); // one claimed, two held back, vis-cron claimed too
    await db.query(
      `update ai_runs set available_at = now() - interval '3 seconds' where kind = 'vis-limited' and status = 'pending'`,
    );
    await runs.start('vis-unserved', { x: 1 }); // a producer's start of a kind nobody serves: due
    const stats = await app.get(RunStatsReader).read();
    expect(stats.heldBack).toEqual({ '["vis-limited"]': 2 });
    expect(stats.dueByKind['vis-limited']).toBeUndefined(); // held runs wait for a slot, not a worker
    expect(stats.dueByKind['vis-unserved']).toEqual({ queueDepth: 1, oldestDueAgeMs: expect.any(Number) });
    expect(stats.queueDepth).toBe(1);
    expect(stats.schedules).toEqual([
      expect.objectContaining({ name: 'vis-cron', paused: false, lastAt: null, nextAt: expect.any(String) }),
    ]);
    const text = await app.get(DurableMetrics).metrics();
    expect(text).toContain('durable_runs_held_back{scope="[\\"vis-limited\\"]"} 2');
    expect(text).toMatch(/durable_schedule_next_tick_timestamp_seconds\{schedule="vis-cron"\} \d+/);
    expect(text).toContain('durable_queue_depth 1');
    expect(text).toContain('durable_queue_depth_by_kind{workflow="vis-unserved"} 1');
  });

  it("the backlog's statements and both claims read the claim index (its predicate excludes held runs)", async () => {
    const c = new Client({ connectionString: db.url });
    await c.connect();
    try {
      await c.query('set enable_seqscan = off'); // a tiny table: only whether the index can serve it
      /** The plan PostgreSQL picks for `sql` prepared, run with the SQL literals `args`. */
      const explain = async (sql: string, args = '') => {
        await c.query(`prepare q as ${sql}`);
        const plan = await c.query(`explain execute q${args ? `(${args})` : ''}`);
        await c.query('deallocate q');
        return plan.rows.map((r) => r['QUERY PLAN']).join('\n');
      };
      expect(await explain(BACKLOG_SQL(DEFAULT_NAMES))).toContain('ai_runs_claim_idx');
      // Both claims: a worker without limits, and one with (the index's predicate is in both).
      const claim = `'w', '{vis-limited}', 1, 30000, '{}', '{vis-limited}', '{1}', 0, 0, 0`; // no hand-off slots
      expect(await explain(CLAIM_RUNS_SQL(DEFAULT_NAMES), claim)).toContain('ai_runs_claim_idx');
      expect(await explain(CLAIM_LIMITED_SQL(DEFAULT_NAMES), claim)).toContain('ai_runs_claim_idx');
    } finally {
      await c.end();
    }
  });
});
