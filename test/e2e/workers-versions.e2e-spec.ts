import { INestApplication } from '@nestjs/common';
import { RunRepository } from '../../src';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { spawnWorker, waitFor, WorkerProcess } from '../helpers/processes';
import { prepareWorkerSchema } from '../helpers/schema';
import { VersionedV2 } from '../fixtures/versioned-workflows';

/** Which versions each worker of the test registers (VERSIONS of worker-app.ts). */
const SERVES: Record<string, number[]> = { 'ver-a': [1], 'ver-b': [2], 'ver-c': [1, 2] };

/**
 * Issue 22's done-when for versioned kinds, with real processes: runs pinned to version 1 and 2 of one
 * kind (and runs started unpinned, pinned by their first claim) on a worker that registers only v1 and
 * one that registers only v2, side by side; the v1 worker is SIGKILLed while it drives v1 runs; the v2
 * worker never takes them over (version 2 inserted a step: their history would not replay); a worker
 * that registers both versions (the next deploy, keeping the v1 class) finishes them. Every run ends
 * `succeeded` on its own path, every step ran with its run's version, and no run hit non-determinism.
 */
describe('a versioned kind with v1 and v2 workers side by side, one SIGKILLed', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let runs: RunRepository;
  const workers: WorkerProcess[] = [];

  beforeAll(async () => {
    db = await createTestDatabase('versions_procs');
    await prepareWorkerSchema(db.url);
    app = await bootApp(db.url);
    runs = app.get(RunRepository);
  });
  afterAll(async () => {
    for (const w of workers) w.child.kill('SIGKILL');
    await Promise.all(workers.map((w) => w.exited));
    await app?.close();
    await db?.drop();
  });

  const spawn = (id: string) => {
    const versions = SERVES[id].length === 2 ? 'both' : `v${SERVES[id][0]}`;
    const w = spawnWorker({
      DB_URL: db.url,
      WORKER_ID: id,
      VERSIONS: versions,
      CONCURRENCY: '4',
      STEP_DELAY_MS: '150',
      LEASE_TTL_MS: '1000',
      HEARTBEAT_MS: '250',
    });
    workers.push(w);
    return w;
  };
  const count = async (sql: string, params: unknown[] = []) =>
    (await db.query(`select count(*)::int as n from (${sql}) x`, params))[0].n as number;

  it('pins each run to one version; only workers of that version drive it; every run finishes on its path', async () => {
    const pinned1: string[] = [];
    const pinned2: string[] = [];
    const unpinned: string[] = [];
    for (let n = 0; n < 8; n++) {
      pinned1.push((await runs.start('versioned', { text: `one ${n}` }, { version: 1 })).run.id);
      pinned2.push((await runs.start('versioned', { text: `two ${n}` }, { version: 2 })).run.id);
      unpinned.push((await runs.start('versioned', { text: `any ${n}` })).run.id);
    }
    // A class names its own version, registered here or not (this producer registers none).
    const byClass = await runs.start(VersionedV2, { text: 'class' });
    expect(byClass.run.version).toBe(2);
    pinned2.push(byClass.run.id);
    expect((await runs.get(pinned1[0]))!.version).toBe(1);
    expect((await runs.get(unpinned[0]))!.version).toBeNull();
    const all = [...pinned1, ...pinned2, ...unpinned];

    const [a, b] = [spawn('ver-a'), spawn('ver-b')];
    await Promise.all([a.ready, b.ready]);
    await waitFor(
      async () => (await count(`select 1 from ai_runs where status = 'waiting'`)) === all.length,
      60_000,
      'every run to wait for its signal',
    );
    // Each unpinned run was pinned by its first claim to the version of the worker that claimed it.
    const firstClaims = await db.query(
      `select distinct on (e.run_id) e.run_id, e.payload->>'workerId' as worker, r.kind_version
         from ai_events e join ai_runs r on r.id = e.run_id
        where e.event_type = 'run.claimed' order by e.run_id, e.id`,
    );
    for (const c of firstClaims) expect(SERVES[c.worker]).toContain(c.kind_version);
    const version = new Map<string, number>(firstClaims.map((c: any) => [c.run_id, c.kind_version]));
    for (const id of pinned1) expect(version.get(id)).toBe(1);
    for (const id of pinned2) expect(version.get(id)).toBe(2);
    const v1 = all.filter((id) => version.get(id) === 1);
    const v2 = all.filter((id) => version.get(id) === 2);
    expect(v1.length + v2.length).toBe(all.length);
    // The operator's view: every run waiting under its version, one live worker for each.
    expect(await runs.versions('versioned')).toEqual([
      { kind: 'versioned', version: 2, pending: 0, waiting: v2.length, running: 0, held: 0, workers: 1 },
      { kind: 'versioned', version: 1, pending: 0, waiting: v1.length, running: 0, held: 0, workers: 1 },
    ]);

    for (const id of all) await runs.signal(id, 'go');
    // SIGKILL the v1 worker while it drives a v1 run (a `ship` step in flight).
    await waitFor(
      async () => (await count(`select 1 from ai_runs where status = 'running' and worker_id = 'ver-a'`)) > 0,
      20_000,
      'the v1 worker to drive a run',
    );
    a.child.kill('SIGKILL');
    await a.exited;
    const stranded = (
      await db.query(`select id from ai_runs where status = 'running' and worker_id = 'ver-a'`)
    ).map((r: any) => r.id as string);
    // Every v2 run finishes on the v2 worker; the v1 runs left behind wait: their leases are recovered
    // (the v2 worker's reconciler), but no v2 worker claims a v1 run.
    await waitFor(
      async () =>
        (await count(`select 1 from ai_runs where status = 'succeeded' and id = any($1)`, [v2])) ===
        v2.length,
      60_000,
      'every v2 run to succeed',
    );
    if (stranded.length) {
      await waitFor(
        async () =>
          (await count(`select 1 from ai_events where event_type = 'run.reconciled' and run_id = any($1)`, [
            stranded,
          ])) === stranded.length,
        20_000,
        'the killed worker runs to be recovered',
      );
    }
    const v1Left = await count(`select 1 from ai_runs where status <> 'succeeded' and id = any($1)`, [v1]);
    expect(v1Left).toBeGreaterThan(0);
    expect(
      await count(
        `select 1 from ai_events where event_type = 'run.claimed' and payload->>'workerId' = 'ver-b' and run_id = any($1)`,
        [v1],
      ),
    ).toBe(0);

    // The next deploy registers both versions: it finishes the v1 runs.
    await spawn('ver-c').ready;
    await waitFor(
      async () => (await count(`select 1 from ai_runs where status = 'succeeded'`)) === all.length,
      60_000,
      'every run to succeed',
    );

    for (const id of all) {
      const run = (await runs.get(id))!;
      const v = version.get(id)!;
      expect({ id, version: run.version, path: (run.output as { path: string }).path }).toEqual({
        id,
        version: v,
        path: `v${v}`,
      });
    }
    // Every step of a run ran with its version's code; a v1 run never ran v2's inserted step.
    const effects = await db.query(`select run_id, step, ref from step_effects where run_id = any($1)`, [
      all,
    ]);
    for (const e of effects)
      expect({ run: e.run_id, ref: e.ref }).toEqual({ run: e.run_id, ref: `v${version.get(e.run_id)}` });
    expect(effects.filter((e: any) => e.step === 'moderate' && version.get(e.run_id) === 1)).toEqual([]);
    // Every claim was made by a worker that registers the run's version; no run was held or failed.
    const claims = await db.query(
      `select run_id, payload->>'workerId' as worker from ai_events where event_type = 'run.claimed'`,
    );
    for (const c of claims) expect(SERVES[c.worker]).toContain(version.get(c.run_id));
    expect(await count(`select 1 from ai_events where event_type in ('run.held', 'run.failed')`)).toBe(0);
    // v1 runs the killed worker left were finished by the worker of the next deploy.
    const finishedByC = await count(
      `select distinct run_id from ai_events
        where event_type = 'run.claimed' and payload->>'workerId' = 'ver-c' and run_id = any($1)`,
      [v1],
    );
    expect(finishedByC).toBeGreaterThan(0);
    const after = await runs.versions('versioned');
    expect(after.every((v) => v.pending + v.waiting + v.running === 0)).toBe(true);
    console.log(
      `versions: ${v1.length} v1 runs (${unpinned.filter((id) => version.get(id) === 1).length} pinned by a first claim), ` +
        `${v2.length} v2 runs; ${stranded.length} v1 run(s) stranded by the SIGKILL, ${finishedByC} finished by the next deploy`,
    );
  });
});
