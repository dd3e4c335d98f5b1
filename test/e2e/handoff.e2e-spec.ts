import { INestApplication, Injectable } from '@nestjs/common';
import fc from 'fast-check';
import { DurableStep, DurableWorkflow, RunRepository } from '../../src';
import { DurableWorker } from '../../src/engine/worker.service';
import { DurableDatabase } from '../../src/store/durable-database';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { waitFor } from '../helpers/processes';

/** Step bodies in flight now, and the most there ever were at once. */
const bodies = { now: 0, max: 0, holdMs: 0 };

@Injectable()
class Steps {
  @DurableStep()
  async work(v: number) {
    bodies.max = Math.max(bodies.max, ++bodies.now);
    try {
      if (bodies.holdMs) await new Promise((r) => setTimeout(r, bodies.holdMs));
      return v;
    } finally {
      bodies.now--;
    }
  }
}

@DurableWorkflow('hand')
class HandWorkflow {
  constructor(private readonly s: Steps) {}
  async run(input: { v: number }) {
    return this.s.work(input.v);
  }
}

@DurableWorkflow('hand-capped', { concurrency: 2 })
class CappedWorkflow {
  constructor(private readonly s: Steps) {}
  async run(input: { v: number }) {
    return this.s.work(input.v);
  }
}

@DurableWorkflow('hand-debounced', { debounce: { periodMs: 100 } })
class DebouncedWorkflow {
  async run() {
    return 1;
  }
}

const WORKFLOWS = [Steps, HandWorkflow, CappedWorkflow, DebouncedWorkflow];

/** A worker on its real schedule; only NOTIFY (or a hand-off) explains a quick start (the poll is a minute). */
const boot = (db: TestDatabase, concurrency: number) =>
  bootApp(db.url, WORKFLOWS, {
    worker: {
      enabled: true,
      concurrency,
      pollIntervalMs: 60_000,
      heartbeatMs: 1000,
      leaseTtlMs: 6000,
      handoffLeaseMs: 1000, // hand-off is off unless set
    },
  });

/** The named statements `app` sends from now on, in order, until `stop()`. */
function recordStatements(app: INestApplication, skip: string[]): { names: string[]; stop: () => void } {
  const dx = app.get(DurableDatabase);
  const names: string[] = [];
  const original = dx.query.bind(dx);
  const spy = jest.spyOn(dx, 'query').mockImplementation((sql, values, name) => {
    if (name && !skip.includes(name)) names.push(name);
    return original(sql, values, name);
  });
  return { names, stop: () => spy.mockRestore() };
}

const events = async (runs: RunRepository, id: string) =>
  (await runs.events(id)).map((e) => ({ type: e.type, epoch: e.epoch, payload: e.payload }));

describe('hand-off: a start hands a due run to an idle worker in its own statement', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let runs: RunRepository;
  let workerId: string;

  /** Waits until the worker offers at least `n` slots (its claims write them). */
  const offering = (n: number) =>
    waitFor(
      async () =>
        (await db.query(`select handoff_slots from ai_workers where worker_id = $1`, [workerId]))[0]
          ?.handoff_slots >= n,
      10_000,
      `the worker to offer ${n} slot(s)`,
    );
  const succeeded = (id: string) =>
    waitFor(async () => (await runs.get(id))?.status === 'succeeded', 10_000, `run ${id} to succeed`);

  beforeAll(async () => {
    db = await createTestDatabase('handoff');
    app = await boot(db, 1);
    runs = app.get(RunRepository);
    workerId = app.get(DurableWorker).id;
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });
  beforeEach(() => Object.assign(bodies, { now: 0, max: 0, holdMs: 0 }));

  it('the run begins with a read, no claim: running at once, its run.claimed written by the start', async () => {
    await offering(1);
    const rec = recordStatements(app, ['dx_get_run']); // not the test's own reads
    const { run } = await runs.start('hand', { v: 1 });
    await succeeded(run.id);
    rec.stop();
    // What the start returned: already running for the worker, at epoch 1.
    expect(run).toMatchObject({ status: 'running', workerId, attempts: 1 });
    // Between the start and the run's own first write, the worker read the run and claimed nothing.
    const started = rec.names.indexOf('dx_start');
    const firstWrite = rec.names.findIndex((n, i) => i > started && /^dx_(finish|step)/.test(n));
    expect(started).toBeGreaterThanOrEqual(0);
    expect(rec.names.slice(started, firstWrite)).toEqual(['dx_start', 'dx_handoff_read']);
    const trail = await events(runs, run.id);
    expect(trail.slice(0, 2)).toEqual([
      { type: 'run.created', epoch: 0, payload: expect.objectContaining({ kind: 'hand' }) },
      {
        type: 'run.claimed',
        epoch: 1,
        payload: { workerId, attempt: 1, timeline: expect.any(Number), handoff: true },
      },
    ]);
    expect(trail.at(-1)).toMatchObject({ type: 'run.succeeded', epoch: 1 });
    expect(await runs.get(run.id)).toMatchObject({ status: 'succeeded', epoch: 1 });
  });

  it('two starts race for one slot: one is handed, the other waits pending and is claimed after', async () => {
    await offering(1);
    bodies.holdMs = 150;
    const [a, b] = await Promise.all([runs.start('hand', { v: 1 }), runs.start('hand', { v: 2 })]);
    expect([a.run.status, b.run.status].sort()).toEqual(['pending', 'running']);
    await succeeded(a.run.id);
    await succeeded(b.run.id);
    expect(bodies.max).toBe(1); // concurrency 1, never more
    const claims = [
      ...(await events(runs, a.run.id)).filter((e) => e.type === 'run.claimed'),
      ...(await events(runs, b.run.id)).filter((e) => e.type === 'run.claimed'),
    ];
    expect(claims.map((c) => c.payload.handoff === true).sort()).toEqual([false, true]);
  });

  it('never hands a run of a limited or debounced kind, pinned to a version it does not serve, keyed or delayed', async () => {
    const notHanded = async (id: string, status: string) => {
      const [r] = await db.query(`select status, handoff_expires_at, epoch from ai_runs where id = $1`, [id]);
      expect(r).toMatchObject({ handoff_expires_at: null });
      if (status === 'succeeded') await succeeded(id);
      const claimed = (await events(runs, id)).filter((e) => e.type === 'run.claimed');
      expect(claimed.every((c) => !c.payload.handoff)).toBe(true);
    };
    await offering(1);
    await notHanded((await runs.start('hand-capped', { v: 1 })).run.id, 'succeeded');
    await offering(1);
    // Due a period after its start (the poll would claim it: a minute here).
    const debounced = (await runs.start('hand-debounced', {})).run;
    expect(debounced.status).toBe('pending');
    await notHanded(debounced.id, 'pending');
    await runs.cancel(debounced.id);
    await offering(1);
    const pinned = (await runs.start('hand', { v: 1 }, { version: 7 })).run;
    expect(pinned.status).toBe('pending'); // no worker serves version 7
    await notHanded(pinned.id, 'pending');
    await runs.cancel(pinned.id);
    await offering(1);
    await notHanded((await runs.start('hand', { v: 1 }, { concurrencyKey: 'k' })).run.id, 'succeeded');
    await offering(1);
    const later = (await runs.start('hand', { v: 1 }, { runAt: new Date(Date.now() + 300) })).run;
    expect(later.status).toBe('pending');
    await notHanded(later.id, 'pending');
  });
});

describe('hand-off under concurrent starts: the worker never runs more than its concurrency', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let runs: RunRepository;
  let workerId: string;

  beforeAll(async () => {
    db = await createTestDatabase('handoff_cap');
    app = await boot(db, 2);
    runs = app.get(RunRepository);
    workerId = app.get(DurableWorker).id;
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('bursts of starts with random gaps: at most 2 bodies and 2 running rows at once, every run once', async () => {
    let handed = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.integer({ min: 0, max: 8 }), { minLength: 1, maxLength: 7 }),
        fc.integer({ min: 0, max: 40 }),
        async (gaps, holdMs) => {
          Object.assign(bodies, { now: 0, max: 0, holdMs });
          let maxRunning = 0;
          let sampling = true;
          const sampler = (async () => {
            while (sampling) {
              const [r] = await db.query(
                `select count(*)::int as n from ai_runs where worker_id = $1 and status = 'running'`,
                [workerId],
              );
              maxRunning = Math.max(maxRunning, r.n);
            }
          })();
          const started = await Promise.all(
            gaps.map(async (gap, i) => {
              await new Promise((r) => setTimeout(r, gap * i));
              return (await runs.start('hand', { v: i })).run;
            }),
          );
          for (const run of started)
            await waitFor(async () => (await runs.get(run.id))?.status === 'succeeded', 15_000, 'the runs');
          sampling = false;
          await sampler;
          expect(bodies.max).toBeLessThanOrEqual(2);
          expect(maxRunning).toBeLessThanOrEqual(2);
          for (const run of started) {
            const claims = (await runs.events(run.id)).filter((e) => e.type === 'run.claimed');
            expect(claims).toHaveLength(1);
            if (claims[0].payload.handoff) handed++;
          }
        },
      ),
      { numRuns: 12, seed: 47 },
    );
    expect(handed).toBeGreaterThan(0); // the property went through hand-offs, not only claims
  }, 120_000);
});

describe('hand-off: a stopping worker hands back what it was handed and did not begin', () => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase('handoff_drain');
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('pending again, its attempt given back; another worker runs it', async () => {
    const app = await boot(db, 2);
    const runs = app.get(RunRepository);
    const worker = app.get(DurableWorker);
    await waitFor(
      async () => (await db.query(`select handoff_slots from ai_workers`))[0]?.handoff_slots >= 1,
      10_000,
      'the worker to offer a slot',
    );
    // The worker stops hearing its NOTIFYs: a run handed to it now is not begun.
    await (worker as unknown as { listener: { stop(): Promise<void> } }).listener.stop();
    const { run } = await runs.start('hand', { v: 5 });
    expect(run).toMatchObject({ status: 'running', workerId: worker.id });
    await app.close();
    const [back] = await db.query(`select status, worker_id, attempts, epoch from ai_runs where id = $1`, [
      run.id,
    ]);
    expect(back).toEqual({ status: 'pending', worker_id: null, attempts: 0, epoch: '1' });
    const trail = (await db.query(
      `select event_type, epoch, payload from ai_events where run_id = $1 order by id`,
      [run.id],
    )) as Array<{ event_type: string; payload: Record<string, unknown> }>;
    expect(trail.map((e) => e.event_type)).toEqual(['run.created', 'run.claimed', 'run.released']);
    expect(trail[2].payload).toEqual({ reason: 'handoff', workerId: worker.id, atStepBoundary: true });

    const next = await boot(db, 2);
    try {
      await waitFor(
        async () => (await next.get(RunRepository).get(run.id))?.status === 'succeeded',
        10_000,
        'the run to succeed on the next worker',
      );
      expect(await next.get(RunRepository).get(run.id)).toMatchObject({ epoch: 2 });
    } finally {
      await next.close();
    }
  });
});
