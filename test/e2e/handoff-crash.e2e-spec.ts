import { INestApplication } from '@nestjs/common';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RunRepository } from '../../src';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { spawnWorker, waitFor, WorkerProcess } from '../helpers/processes';
import { prepareWorkerSchema } from '../helpers/schema';

/** A lease of 12 s: a hand-off's is 2 s (a sixth), renewed at a third of it if nothing was written. */
const LEASE_TTL_MS = 12_000;
const HANDOFF_MS = 2000;

/**
 * Hand-off (issue 47 part 2) across real OS processes: a worker (test/fixtures/worker-app.ts) offers its
 * room, a start in this process (no worker here, a reconciler every 200 ms) hands it a `handed` run,
 * whose first step is a compute step that takes STEP_DELAY_MS before it writes anything; the worker is
 * killed or frozen as soon as it began the run (its CLAIM_LOG line).
 */
describe('hand-off: a worker that dies or freezes right after it was handed a run', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let runs: RunRepository;
  const workers: WorkerProcess[] = [];
  const logs: string[] = [];

  const worker = (id: string, env: Record<string, string> = {}) => {
    const log = join(tmpdir(), `handoff-${process.pid}-${id}.log`);
    logs.push(log);
    const w = spawnWorker({
      DB_URL: db.url,
      WORKER_ID: id,
      LEASE_TTL_MS: String(LEASE_TTL_MS),
      HEARTBEAT_MS: '3000',
      HANDOFF_LEASE_MS: String(HANDOFF_MS),
      CLAIM_LOG: log,
      ...env,
    });
    workers.push(w);
    return { ...w, log };
  };
  /** Until the worker's row offers a slot (its claims write it). */
  const offering = (id: string) =>
    waitFor(
      async () =>
        (await db.query(`select handoff_slots from ai_workers where worker_id = $1`, [id]))[0]
          ?.handoff_slots > 0,
      15_000,
      `worker ${id} to offer a slot`,
    );
  /** Polls the worker's CLAIM_LOG every 2 ms until its attempt of `runId` began. */
  const began = async (log: string, runId: string) => {
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline) {
      if (existsSync(log) && readFileSync(log, 'utf8').includes(`"runId":"${runId}"`)) return;
      await new Promise((r) => setTimeout(r, 2));
    }
    throw new Error(`run ${runId} did not begin`);
  };
  const row = async (id: string) =>
    (await db.query(`select status, worker_id, epoch, attempts from ai_runs where id = $1`, [id]))[0];
  const trail = async (id: string) =>
    (await db.query(`select event_type, epoch, payload from ai_events where run_id = $1 order by id`, [
      id,
    ])) as Array<{
      event_type: string;
      epoch: string;
      payload: Record<string, unknown>;
    }>;

  beforeAll(async () => {
    db = await createTestDatabase('handoff_crash');
    await prepareWorkerSchema(db.url);
    app = await bootApp(db.url, [], {
      database: { migrationsRun: false },
      reconciler: { enabled: true, intervalMs: 200, backoffBaseMs: 10, backoffMaxMs: 100 },
    });
    runs = app.get(RunRepository);
  }, 60_000);
  afterAll(async () => {
    for (const w of workers)
      if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill('SIGKILL');
    await Promise.all(workers.map((w) => w.exited));
    await app?.close();
    await db?.drop();
    for (const log of logs) rmSync(log, { force: true });
  });

  it('SIGKILL right after the hand-off: taken back after the hand-off lease, not a full lease, and the attempt not charged', async () => {
    const a = worker('handoff-kill', { STEP_DELAY_MS: '5000' });
    await a.ready;
    await offering('handoff-kill');
    const { run } = await runs.start('handed', {});
    expect(run).toMatchObject({ status: 'running', workerId: 'handoff-kill', epoch: 1, attempts: 1 });
    await began(a.log, run.id);
    a.child.kill('SIGKILL');
    const killedAt = Date.now();
    await a.exited;
    await waitFor(async () => (await row(run.id)).status !== 'running', LEASE_TTL_MS, 'the reconciler');
    const recoveredMs = Date.now() - killedAt;
    console.log(`hand-off of a killed worker taken back after ${recoveredMs} ms (lease ${LEASE_TTL_MS} ms)`);
    expect(recoveredMs).toBeLessThan(LEASE_TTL_MS / 2);
    expect(await row(run.id)).toEqual({ status: 'waiting', worker_id: null, epoch: '1', attempts: 0 });
    expect((await trail(run.id)).at(-1)).toMatchObject({
      event_type: 'run.reconciled',
      epoch: '1',
      payload: {
        reason: 'lease_expired',
        previousWorker: 'handoff-kill',
        outcome: 'waiting',
        attempts: 0,
        handoff: true,
      },
    });
    // The dead worker offers nothing any more: a start now is not handed to it.
    const { run: later } = await runs.start('handed', {});
    expect(later.status).toBe('pending');

    const b = worker('handoff-next');
    await waitFor(
      async () => (await row(run.id)).status === 'succeeded' && (await row(later.id)).status === 'succeeded',
      20_000,
      'both runs to succeed on the next worker',
    );
    expect(await row(run.id)).toMatchObject({ epoch: '2', worker_id: null });
    const effects = await db.query(`select step, pid from step_effects where run_id = $1 order by id`, [
      run.id,
    ]);
    expect(effects.map((e) => e.step)).toEqual(['quote', 'finalize']); // the killed body never got to its effect
    expect(new Set(effects.map((e) => e.pid))).toEqual(new Set([b.child.pid]));
    b.child.kill('SIGTERM');
    await b.exited;
  }, 90_000);

  it("a worker restarted under the same id does not wait for its predecessor's hand-offs", async () => {
    const a = worker('handoff-same', { WORKER_ID: 'handoff-same' });
    await a.ready;
    await offering('handoff-same');
    a.child.kill('SIGKILL'); // idle, its slots still offered
    await a.exited;
    const b = worker('handoff-same-2', { WORKER_ID: 'handoff-same' });
    await b.ready;
    const t0 = Date.now();
    const { run } = await runs.start('handed', {});
    await waitFor(
      async () => (await row(run.id)).status === 'succeeded',
      10_000,
      'the run on the new process',
    );
    // Not handed to the dead process's slots: no hand-off lease waited out, nothing reconciled.
    expect(Date.now() - t0).toBeLessThan(HANDOFF_MS);
    expect((await trail(run.id)).map((e) => e.event_type)).not.toContain('run.reconciled');
    expect((await db.query(`select pid from step_effects where run_id = $1`, [run.id]))[0].pid).toBe(
      b.child.pid,
    );
    b.child.kill('SIGTERM');
    await b.exited;
  }, 60_000);

  it('SIGSTOP past the hand-off lease: the run is taken back and run elsewhere, the frozen worker writes nothing', async () => {
    const a = worker('handoff-zombie', { STEP_DELAY_MS: '1500' });
    await a.ready;
    await offering('handoff-zombie');
    const { run } = await runs.start('handed', {});
    expect(run.workerId).toBe('handoff-zombie');
    await began(a.log, run.id);
    a.child.kill('SIGSTOP');
    try {
      await waitFor(async () => (await row(run.id)).status !== 'running', LEASE_TTL_MS, 'the reconciler');
      expect(await row(run.id)).toMatchObject({ status: 'waiting', attempts: 0 });
      const b = worker('handoff-taker');
      await waitFor(async () => (await row(run.id)).status === 'succeeded', 20_000, 'the run on the taker');
      b.child.kill('SIGTERM');
      await b.exited;
    } finally {
      a.child.kill('SIGCONT');
    }
    // The frozen worker wakes inside its step: its lease is gone, and its step's commit is refused.
    await waitFor(
      async () => readFileSync(a.log, 'utf8').includes('"outcome":"lease_lost"'),
      10_000,
      'the woken worker to find its lease lost',
    );
    const checkpoints = await db.query(`select step_name, epoch from ai_checkpoints where run_id = $1`, [
      run.id,
    ]);
    expect(checkpoints.length).toBeGreaterThan(0);
    expect(checkpoints.every((c) => c.epoch === '2')).toBe(true); // nothing of epoch 1 was recorded
    expect((await trail(run.id)).filter((e) => e.epoch === '1').map((e) => e.event_type)).toEqual([
      'run.claimed',
      'run.reconciled',
    ]);
    expect(await row(run.id)).toMatchObject({ status: 'succeeded', epoch: '2' });
    a.child.kill('SIGTERM');
    await a.exited;
  }, 90_000);
});
