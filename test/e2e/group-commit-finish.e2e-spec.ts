import { INestApplication, Injectable } from '@nestjs/common';
import { DurableStep, DurableWorkflow, LeaseLostError, RunContext, RunRepository } from '../../src';
import { DurableWorker } from '../../src/engine/worker.service';
import type { Fence } from '../../src/store/run-state/fence';
import { FinishBatcher } from '../../src/store/run-state/finish-batch';
import { finishRun, FinishWrite } from '../../src/store/run-state/finish-run';
import { RunStateStore } from '../../src/store/run-state/run-state.store';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { claimInserted, RowLocks, startAllAndDrive } from '../helpers/row-locks';
import { TRAIL } from '../helpers/event-trail';

/**
 * Issue 38: group commit of finishes. Finishes of several runs that wait behind one in flight go as ONE
 * statement (FINISH_BATCH_SQL, the same template as FINISH_RUN_SQL), each fenced by its own run: each
 * run ends as it would alone (status, output, error, due time, events), a stale run fails alone, the
 * slots two runs free in one statement wake two held runs, and a cancel that beat a success still wins.
 */
let db: TestDatabase;
const RAW = 'gcf-raw';

@Injectable()
class Steps {
  @DurableStep({ name: 'only' })
  async only(runId: string) {
    return { runId };
  }
}

@DurableWorkflow('gcf-capped', { concurrency: 2 })
class Capped {
  constructor(private readonly s: Steps) {}
  async run(_input: unknown, ctx: RunContext) {
    return this.s.only(ctx.runId);
  }
}

@DurableWorkflow('gcf-one')
class OneStep {
  constructor(private readonly s: Steps) {}
  async run(_input: unknown, ctx: RunContext) {
    return this.s.only(ctx.runId);
  }
}

describe('group commit of finishes (issue 38)', () => {
  let app: INestApplication;
  let store: RunStateStore;
  let locks: RowLocks;

  beforeAll(async () => {
    db = await createTestDatabase('group_commit_finish');
    app = await bootApp(db.url, [Steps, Capped, OneStep], { worker: { concurrency: 24 } });
    store = app.get(RunStateStore, { strict: false });
    locks = new RowLocks(db.url);
  });
  afterEach(() => locks.endAll());
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  const claim = (kind: string, n: number, insert = n, limited = false) =>
    claimInserted(db, store, kind, n, insert, limited);
  const lockRun = (runId: string) => locks.lock(runId);

  const finish = (b: FinishBatcher, f: Fence, w: FinishWrite) =>
    finishRun({ db: store.db, options: store.options, finishes: b }, f, w);
  const succeeded = (output: unknown): FinishWrite => ({
    status: 'succeeded',
    outputJson: JSON.stringify(output),
    event: 'run.succeeded',
    payload: {},
  });
  const row = async (id: string) =>
    (
      await db.query(
        `select status, output, output is null as no_output, error, worker_id, finished_at is not null as finished,
                available_at > now() + interval '30 seconds' as later,
                (select array_agg(event_type order by id) from ${TRAIL} e where e.run_id = r.id) as events
           from ai_runs r where id = $1`,
        [id],
      )
    )[0];

  it('finishes queued behind one in flight go as one statement; each run ends as it would alone', async () => {
    const [z, a, b, c, d, stale] = await claim(RAW, 6);
    const batcher = new FinishBatcher(store, 1);
    await db.query(`update ai_runs set epoch = epoch + 1 where id = $1`, [stale.runId]);
    const release = await lockRun(z.runId);
    const first = finish(batcher, z, succeeded('z'));
    const outcomes = Promise.allSettled([
      finish(batcher, a, succeeded({ a: 1 })),
      finish(batcher, b, succeeded(null)),
      finish(batcher, c, {
        status: 'failed',
        error: { message: 'no' },
        event: 'run.failed',
        payload: { why: 'no' },
      }),
      finish(batcher, d, {
        status: 'waiting',
        delayMs: 60_000,
        attemptsDelta: 1,
        event: 'run.retry_scheduled',
        payload: { in: 60_000 },
      }),
      finish(batcher, stale, succeeded('stale')),
    ]);
    await release();
    expect(await first).toBe('succeeded');
    const [oa, ob, oc, od, os] = await outcomes;
    expect([oa, ob, oc, od].map((o) => o.status === 'fulfilled' && o.value)).toEqual([
      'succeeded',
      'succeeded',
      'failed',
      'waiting',
    ]);
    expect(os.status === 'rejected' && os.reason).toBeInstanceOf(LeaseLostError);
    expect(batcher.stats).toEqual({ statements: 2, writes: 6, batches: 1 });

    expect(await row(a.runId)).toMatchObject({
      status: 'succeeded',
      output: { a: 1 },
      finished: true,
      worker_id: null,
    });
    // A JSON null output is stored as jsonb null, as FINISH_RUN_SQL stores it (not SQL NULL).
    expect(await row(b.runId)).toMatchObject({ status: 'succeeded', output: null, no_output: false });
    expect(await row(c.runId)).toMatchObject({ status: 'failed', error: { message: 'no' }, finished: true });
    expect(await row(d.runId)).toMatchObject({
      status: 'waiting',
      later: true,
      finished: false,
      worker_id: null,
    });
    expect((await row(a.runId)).events).toEqual(['run.claimed', 'run.succeeded']);
    expect((await row(c.runId)).events).toEqual(['run.claimed', 'run.failed']);
    expect((await row(d.runId)).events).toEqual(['run.claimed', 'run.retry_scheduled']);
    expect(await row(stale.runId)).toMatchObject({ status: 'running', events: ['run.claimed'] });
  });

  it('a cancel that beat a success still wins inside a batch', async () => {
    const [z, a, b] = await claim(RAW, 3);
    const batcher = new FinishBatcher(store, 1);
    await db.query(`update ai_runs set cancel_requested_at = now(), cancel_reason = 'stop' where id = $1`, [
      a.runId,
    ]);
    const release = await lockRun(z.runId);
    const first = finish(batcher, z, succeeded('z'));
    const outcomes = Promise.all([finish(batcher, a, succeeded('a')), finish(batcher, b, succeeded('b'))]);
    await release();
    await first;
    expect(await outcomes).toEqual(['cancelled', 'succeeded']);
    expect(batcher.stats.batches).toBe(1);
    expect(await row(a.runId)).toMatchObject({
      status: 'cancelled',
      no_output: true,
      error: expect.objectContaining({ code: 'DURABLE_RUN_CANCELLED' }),
      events: ['run.claimed', 'run.cancelled'],
    });
  });

  it('two runs of a limited kind finished in one statement free two slots and wake two held runs', async () => {
    await app.get(DurableWorker).tick(); // declares the kinds' limits (nothing of theirs to claim yet)
    const [z] = await claim(RAW, 1);
    const holders = await claim('gcf-capped', 5, 5, true); // 2 slots taken, 3 runs held back
    expect(holders).toHaveLength(2);
    const held = async () =>
      (
        await db.query(
          `select count(*)::int as n from ai_runs where kind = 'gcf-capped' and limited_by is not null`,
        )
      )[0].n;
    expect(await held()).toBe(3);
    const batcher = new FinishBatcher(store, 1);
    const release = await lockRun(z.runId);
    const first = finish(batcher, z, succeeded('z'));
    const both = Promise.all(holders.map((f) => finish(batcher, f, succeeded('done'))));
    await release();
    await first;
    expect(await both).toEqual(['succeeded', 'succeeded']);
    expect(batcher.stats.batches).toBe(1);
    expect(await held()).toBe(1);
    const [slots] = await db.query(
      `select count(*)::int as free from ai_slots where kind = 'gcf-capped' and run_id is null`,
    );
    expect(slots.free).toBe(2);
  });

  it('through the worker: 30 one-step runs at once share finish statements and all end succeeded', async () => {
    const runs = app.get(RunRepository);
    const before = { ...store.finishes.stats };
    const ids = await startAllAndDrive(app, db, OneStep, 30);
    expect(store.finishes.stats.batches).toBeGreaterThan(before.batches);
    for (const id of ids) {
      expect((await runs.get(id))?.output).toEqual({ runId: id });
      expect((await row(id)).events).toEqual([
        'run.created',
        'run.claimed',
        'run.checkpoint_saved',
        'run.succeeded',
      ]);
    }
  });
});
