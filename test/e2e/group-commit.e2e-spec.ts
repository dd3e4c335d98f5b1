import { INestApplication, Injectable } from '@nestjs/common';
import { DurableStep, DurableWorkflow, LeaseLostError, RunContext, RunRepository } from '../../src';
import { DurableWorker } from '../../src/engine/worker.service';
import type { Fence } from '../../src/store/run-state/fence';
import { RunStateStore } from '../../src/store/run-state/run-state.store';
import { StepWriteBatcher } from '../../src/store/run-state/step-batch';
import { writeStep } from '../../src/store/run-state/step-write';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { waitFor } from '../helpers/processes';
import { claimInserted, RowLocks, startAllAndDrive } from '../helpers/row-locks';
import { TRAIL } from '../helpers/event-trail';

/**
 * Issue 38: group commit. Step writes of several runs of one worker that wait behind a write in flight
 * go as ONE statement, each row fenced by its own run's epoch: a stale run fails alone, a row the
 * server refuses fails only its run (the batch is rolled back and each write sent alone), an unknown
 * outcome (connection gone) fails every write of it and sends none again. A lone write never waits.
 */
let db: TestDatabase;
const RAW = 'gc-raw';

@Injectable()
class Steps {
  @DurableStep({ name: 'part' })
  async part(runId: string, i: number) {
    return { runId, i };
  }
}

@DurableWorkflow('gc-five')
class FiveSteps {
  constructor(private readonly s: Steps) {}
  async run(_input: unknown, ctx: RunContext) {
    const out = [];
    for (let i = 0; i < 5; i++) out.push(await this.s.part(ctx.runId, i));
    return out.length;
  }
}

describe('group commit of step writes (issue 38)', () => {
  let app: INestApplication;
  let store: RunStateStore;
  let locks: RowLocks;

  beforeAll(async () => {
    db = await createTestDatabase('group_commit');
    app = await bootApp(db.url, [Steps, FiveSteps], { worker: { concurrency: 24 } });
    store = app.get(RunStateStore, { strict: false });
    locks = new RowLocks(db.url);
  });
  afterEach(() => locks.endAll());
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  const claimRaw = (n: number) => claimInserted(db, store, RAW, n);
  const lockRun = (runId: string) => locks.lock(runId);

  /** A step commit of `index` for run `f` through `batcher`, its output naming the run. */
  const commit = (batcher: StepWriteBatcher, f: Fence, index = 0, attempt = 0) =>
    writeStep(
      { db: store.db, options: store.options, steps: batcher },
      f,
      { step: index, name: 'part', status: 'done', attempt, item: null },
      [{ index, name: 'part', outputJson: JSON.stringify({ run: f.runId, index }) }],
      'run.checkpoint_saved',
      { step: index, name: 'part' },
      true,
    );

  const record = async (runId: string) => {
    const checkpoints = await db.query(
      `select step_index, output, xmin::text as tx from ai_checkpoints where run_id = $1 order by step_index`,
      [runId],
    );
    const events = await db.query(
      `select payload from ${TRAIL} t where run_id = $1 and event_type = 'run.checkpoint_saved' order by id`,
      [runId],
    );
    const [run] = await db.query(`select cursor from ai_runs where id = $1`, [runId]);
    return { checkpoints, events: events.map((e: { payload: unknown }) => e.payload), cursor: run.cursor };
  };

  it('writes queued behind a write in flight go as one statement; each run keeps its own record', async () => {
    const [z, ...rest] = await claimRaw(7);
    const batcher = new StepWriteBatcher(store, 1);
    const release = await lockRun(z.runId);
    const first = commit(batcher, z);
    const queued = rest.map((f) => commit(batcher, f));
    expect(batcher.stats).toEqual({ statements: 1, writes: 1, batches: 0 });
    await release();
    await Promise.all([first, ...queued]);
    expect(batcher.stats).toEqual({ statements: 2, writes: 7, batches: 1 });
    const txs = new Set<string>();
    for (const f of rest) {
      const r = await record(f.runId);
      expect(r.checkpoints).toEqual([
        { step_index: 0, output: { run: f.runId, index: 0 }, tx: expect.any(String) },
      ]);
      expect(r.events).toEqual([{ step: 0, name: 'part' }]);
      expect(r.cursor).toMatchObject({ step: 0, status: 'done' });
      txs.add(r.checkpoints[0].tx);
    }
    expect(txs.size).toBe(1); // one transaction wrote all six
  });

  it('a run whose fence moved on fails alone with LeaseLostError and writes nothing; the others commit', async () => {
    const [z, a, b, c] = await claimRaw(4);
    const batcher = new StepWriteBatcher(store, 1);
    await db.query(`update ai_runs set epoch = epoch + 1 where id = $1`, [b.runId]); // a newer claim
    const release = await lockRun(z.runId);
    const first = commit(batcher, z);
    const outcomes = Promise.allSettled([a, b, c].map((f) => commit(batcher, f)));
    await release();
    await first;
    const [oa, ob, oc] = await outcomes;
    expect(oa.status).toBe('fulfilled');
    expect(oc.status).toBe('fulfilled');
    expect(ob.status === 'rejected' && ob.reason).toBeInstanceOf(LeaseLostError);
    expect(batcher.stats.batches).toBe(1);
    expect((await record(b.runId)).checkpoints).toEqual([]);
    expect((await record(b.runId)).events).toEqual([]);
    for (const f of [a, c]) expect((await record(f.runId)).events).toHaveLength(1);
  });

  it('a row the server refuses: the batch rolls back, each write goes alone, only that run fails', async () => {
    const [z, a, b, c] = await claimRaw(4);
    const batcher = new StepWriteBatcher(store, 1);
    const release = await lockRun(z.runId);
    const first = commit(batcher, z);
    const outcomes = Promise.allSettled([
      commit(batcher, a),
      commit(batcher, b, 0, 2 ** 31), // the checkpoint's attempt is an integer column: out of range
      commit(batcher, c),
    ]);
    await release();
    await first;
    const [oa, ob, oc] = await outcomes;
    expect([oa.status, oc.status]).toEqual(['fulfilled', 'fulfilled']);
    expect(ob.status === 'rejected' && (ob.reason as { code?: string }).code).toBe('22003');
    expect(batcher.stats).toEqual({ statements: 5, writes: 7, batches: 1 }); // z, the batch, 3 alone
    for (const f of [a, c]) {
      const r = await record(f.runId);
      expect(r.events).toHaveLength(1); // written once: the rolled-back batch left nothing
      expect(r.checkpoints).toHaveLength(1);
    }
    expect(await record(b.runId)).toMatchObject({ checkpoints: [], events: [] });
  });

  it('an unknown outcome (its connection terminated) fails every write of the batch and sends none again', async () => {
    const [z, a, b] = await claimRaw(3);
    const batcher = new StepWriteBatcher(store, 1);
    const releaseZ = await lockRun(z.runId);
    const releaseA = await lockRun(a.runId);
    const first = commit(batcher, z);
    const outcomes = Promise.allSettled([commit(batcher, a), commit(batcher, b)]);
    await releaseZ();
    await first;
    // The batch now waits for a's row lock: end its session as a failover or an operator would.
    let pid: number | undefined;
    await waitFor(
      async () => {
        const rows = await db.query(
          `select pid from pg_stat_activity
            where datname = current_database() and wait_event_type = 'Lock'
              and query like '%jsonb_to_recordset($1::jsonb) as i(%'`,
        );
        pid = rows[0]?.pid;
        return pid !== undefined;
      },
      10_000,
      'the batch waiting for the row lock',
    );
    await db.query(`select pg_terminate_backend($1)`, [pid]);
    const [oa, ob] = await outcomes;
    expect(oa.status === 'rejected' && (oa.reason as { code?: string }).code).toBe('57P01');
    expect(ob.status === 'rejected' && (ob.reason as { code?: string }).code).toBe('57P01');
    await releaseA('rollback');
    expect(batcher.stats).toEqual({ statements: 2, writes: 3, batches: 1 });
    expect(await record(b.runId)).toMatchObject({ checkpoints: [], events: [] });
  });

  it("a run's second write waits for the next statement: one write per run per batch, in order", async () => {
    const [z, a, b] = await claimRaw(3);
    const batcher = new StepWriteBatcher(store, 1);
    const release = await lockRun(z.runId);
    const first = commit(batcher, z);
    const queued = [commit(batcher, a, 0), commit(batcher, a, 1), commit(batcher, b, 0)];
    await release();
    await Promise.all([first, ...queued]);
    expect(batcher.stats).toEqual({ statements: 3, writes: 4, batches: 1 }); // z; [a0, b0]; a1 alone
    const r = await record(a.runId);
    expect(r.events).toEqual([
      { step: 0, name: 'part' },
      { step: 1, name: 'part' },
    ]);
    expect(r.cursor).toMatchObject({ step: 1, status: 'done' });
    expect(r.checkpoints.map((c: { step_index: number }) => c.step_index)).toEqual([0, 1]);
  });

  it('two batches in flight never share a run: a run in one waits for it (no lock-order deadlock)', async () => {
    const [z1, z2, a, c] = await claimRaw(4);
    const batcher = new StepWriteBatcher(store, 2);
    const releaseZ1 = await lockRun(z1.runId);
    const releaseZ2 = await lockRun(z2.runId);
    const releaseA = await lockRun(a.runId);
    const lone = [commit(batcher, z1), commit(batcher, z2)]; // both slots in flight
    const queued = [
      commit(batcher, a, 0),
      commit(batcher, c, 0),
      commit(batcher, a, 1),
      commit(batcher, c, 1),
    ];
    await releaseZ1();
    await lone[0]; // the first batch [a0, c0] goes, and waits for a's row lock
    await releaseZ2();
    await lone[1]; // a slot is free, but a1 and c1 wait for the batch that holds their runs
    expect(batcher.stats).toEqual({ statements: 3, writes: 4, batches: 1 });
    await releaseA();
    await Promise.all(queued);
    expect(batcher.stats).toEqual({ statements: 4, writes: 6, batches: 2 });
    for (const f of [a, c])
      expect((await record(f.runId)).events).toEqual([
        { step: 0, name: 'part' },
        { step: 1, name: 'part' },
      ]);
  });

  it('through the worker: 20 five-step runs at once share statements, and every record is complete', async () => {
    const runs = app.get(RunRepository);
    const before = { ...store.steps.stats };
    const ids = await startAllAndDrive(app, db, FiveSteps, 20);
    const writes = store.steps.stats.writes - before.writes;
    const statements = store.steps.stats.statements - before.statements;
    expect(store.steps.stats.batches).toBeGreaterThan(before.batches);
    expect(statements).toBeLessThan(writes);
    for (const id of ids) {
      const r = await record(id);
      expect(r.checkpoints.map((c: { output: unknown }) => c.output)).toEqual(
        [0, 1, 2, 3, 4].map((i) => ({ runId: id, i })),
      );
      expect(r.events).toHaveLength(5);
      expect((await runs.get(id))?.output).toBe(5);
    }
  });

  it('a lone run: its step writes are sent alone, never held for a batch', async () => {
    const runs = app.get(RunRepository);
    const worker = app.get(DurableWorker);
    const before = { ...store.steps.stats };
    const { run } = await runs.start(FiveSteps, {});
    await worker.tick();
    await worker.idle();
    expect((await runs.get(run.id))?.status).toBe('succeeded');
    expect(store.steps.stats.batches).toBe(before.batches);
    expect(store.steps.stats.statements - before.statements).toBe(store.steps.stats.writes - before.writes);
  });
});
