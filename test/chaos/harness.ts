import { ChildProcess, fork } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Client } from 'pg';
import { DurableExecutionModule, RunRepository } from '../../src';
import { Reconciler } from '../../src/maintenance/reconciler.service';
import { compiledEntry } from '../helpers/compiled';
import { FakeTarget, startFakeTarget } from '../helpers/fake-target';
import { startOwnedPostgres } from '../helpers/owned-postgres';
import { prepareWorkerSchema } from '../helpers/schema';
import { AgentWorkflow, CHAOS_WORKER_OPTIONS, Model, Notifier, Vendors } from './chaos-worker';
import { ChaosOptions, Fault, planFaults } from './fault-plan';
import { checkInvariants, InvariantResult } from './invariants';
import { summarize, ChaosReport } from './report';

const WORKER = path.join(__dirname, 'chaos-worker.ts');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Slot {
  child?: ChildProcess;
  armed?: string;
  ready: boolean;
  spawns: number;
}

/**
 * Runs the chaos scenario end to end on a PostgreSQL instance of its own: N agent runs on W worker
 * processes under a supervisor, the seeded fault plan, an operator that approves parked runs; then
 * stops everything and checks every invariant. Same seed, same fault plan.
 */
export async function runChaos(
  o: ChaosOptions,
  log: (line: string) => void = () => undefined,
): Promise<ChaosReport> {
  const startedAt = Date.now();
  const pg = await startOwnedPostgres();
  const pay: FakeTarget = await startFakeTarget({ honoursKeys: false });
  const notify: FakeTarget = await startFakeTarget({ honoursKeys: true });
  // Workers start from compiled JavaScript, without ts-node (~2.5 s a boot in session 1), so a
  // planned kill or stall finds a worker up and holding runs more often.
  const workerJs = compiledEntry(WORKER);
  const slots: Slot[] = Array.from({ length: o.workers }, () => ({ spawns: 0, ready: false }));
  const applied: Record<string, number> = {};
  let stopping = false;
  let api: Awaited<ReturnType<typeof NestFactory.createApplicationContext>> | undefined;
  const timers: NodeJS.Timeout[] = [];
  const count = (k: string) => (applied[k] = (applied[k] ?? 0) + 1);
  const crashLog = path.join(mkdtempSync(path.join(tmpdir(), 'chaos-')), 'crash-points.log');

  const extras: ChildProcess[] = [];
  const spawnArmed = (point: string): void => {
    const slot: Slot = { spawns: 0, ready: false };
    slots.push(slot);
    spawn(slots.length - 1, point);
    extras.push(slot.child!);
  };

  const spawn = (i: number, armed?: string): void => {
    const slot = slots[i];
    slot.armed = armed;
    slot.spawns++;
    const child = fork(workerJs, [], {
      env: {
        ...process.env,
        DB_URL: pg.url,
        PAY_URL: pay.url,
        NOTIFY_URL: notify.url,
        DURABLE_CRASH_AT: armed ?? '',
        DURABLE_CRASH_LOG: crashLog,
      },
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    });
    slot.child = child;
    slot.ready = false;
    child.once('message', () => {
      if (slot.child === child) slot.ready = true;
    });
    child.once('exit', () => {
      if (stopping || slot.child !== child || armed) return;
      setTimeout(() => !stopping && spawn(i), 200); // the supervisor restarts what died
    });
    if (armed === 'during-drain') {
      // Drain only happens on SIGTERM: give it runs in flight, then ask it to stop.
      child.once('message', () => timers.push(setTimeout(() => child.kill('SIGTERM'), 800)));
    }
  };

  /**
   * The worker a fault hits: the planned slot if it is up and not armed, else the next one that is.
   * Killing a process that is still booting, or one armed to die at a crash point, would test nothing.
   */
  const victim = (planned: number): ChildProcess | undefined => {
    for (let k = 0; k < o.workers; k++) {
      const s = slots[(planned + k) % o.workers];
      if (s.child && s.ready && !s.armed && s.child.exitCode === null && !s.child.signalCode) return s.child;
    }
    return undefined;
  };

  const query = async (sql: string, params: unknown[]): Promise<any[]> => {
    const c = new Client({ connectionString: pg.url });
    c.on('error', () => undefined);
    await c.connect();
    try {
      return (await c.query(sql, params)).rows;
    } finally {
      await c.end();
    }
  };
  const heldBy = async (pid: number): Promise<string[]> =>
    (
      await query(`select id from ai_runs where status = 'running' and worker_id like $1`, [`%:${pid}:%`])
    ).map((r) => r.id);
  const takenOver = async (ids: string[], pid: number): Promise<boolean> =>
    (
      await query(
        `select count(*) filter (where worker_id like $2) = 0
                and count(*) filter (where status = 'running' and worker_id not like $2) > 0 as all_taken
           from ai_runs where id = any($1)`,
        [ids, `%:${pid}:%`],
      ).catch(() => [{ all_taken: false }])
    )[0].all_taken === true;
  const tries = new Map<Fault, number>();
  let settled = 0;
  /** No worker is up to take this fault right now (all booting): try again shortly. */
  const retryLater = (f: Fault): void => {
    const n = (tries.get(f) ?? 0) + 1;
    tries.set(f, n);
    if (n > 60) {
      settled++;
      return void count(`${f.kind} skipped (no worker up for 30 s)`);
    }
    timers.push(setTimeout(() => void applyOnce(f), 500));
  };
  /** Applies a fault; counts it settled unless it was put back for later. */
  const applyOnce = async (f: Fault): Promise<void> => {
    const before = tries.get(f) ?? 0;
    try {
      await apply(f);
    } catch (e) {
      log(`fault ${f.kind} failed: ${(e as Error).message}`);
    }
    if ((tries.get(f) ?? 0) === before) settled++;
  };

  const apply = async (f: Fault): Promise<void> => {
    const child = 'worker' in f ? victim(f.worker) : undefined;
    switch (f.kind) {
      case 'kill':
        if (!child) return retryLater(f);
        child.kill('SIGKILL');
        count('SIGKILL at random');
        return;
      case 'crash-point':
        // An extra worker armed to die at that point; it competes for runs like the others and is not
        // restarted (the four supervised workers stay up for the random faults).
        count(`worker armed: ${f.point}`);
        spawnArmed(f.point);
        return;
      case 'stall': {
        if (!child) return retryLater(f);
        // The chapter's zombie: frozen while it holds runs; woken the moment other workers have taken
        // them over, so its next writes race the new owners' (only the fence stops them).
        const held = await heldBy(child.pid!);
        if (!held.length) return retryLater(f);
        child.kill('SIGSTOP');
        count('SIGSTOP past the lease TTL (zombie)');
        const until = Date.now() + f.ms;
        while (Date.now() < until && !(await takenOver(held, child.pid!))) await sleep(25);
        child.kill('SIGCONT');
        if (Date.now() < until) count('zombie woken right after the takeover');
        return;
      }
      case 'terminate-connections': {
        const c = new Client({ connectionString: pg.url });
        c.on('error', () => undefined);
        await c.connect();
        await c.query(`select pg_terminate_backend(pid) from pg_stat_activity
                        where datname = current_database() and pid <> pg_backend_pid()`);
        await c.end();
        count('pg_terminate_backend of all connections');
        return;
      }
      case 'pg-restart':
        await pg.stop();
        await sleep(f.downMs);
        await pg.start();
        count('PostgreSQL restart');
        return;
    }
  };

  try {
    await prepareWorkerSchema(pg.url);
    @Module({
      imports: [
        DurableExecutionModule.forRoot({
          database: { url: pg.url, poolSize: 4, migrationsRun: false },
          worker: { ...CHAOS_WORKER_OPTIONS, enabled: false },
          reconciler: { enabled: false },
        }),
      ],
      providers: [Model, Vendors, Notifier, AgentWorkflow],
    })
    class OperatorModule {}
    api = await NestFactory.createApplicationContext(OperatorModule, { logger: false });
    const runs = api.get(RunRepository);
    log(`${o.runs} runs arriving over ${o.windowMs} ms; ${o.workers} workers; seed ${o.seed}`);
    for (let i = 0; i < o.workers; i++) spawn(i);
    while (!slots.every((x) => x.ready)) await sleep(100); // faults and runs start once all are up
    const faults = planFaults(o, CHAOS_WORKER_OPTIONS.leaseTtlMs);
    const t0 = Date.now();
    for (const f of faults) {
      timers.push(setTimeout(() => void applyOnce(f), f.at));
    }
    // Runs arrive over the fault window (so faults land on runs in flight); half of them get their
    // approval signal before they reach the wait.
    const arrivals = (async () => {
      for (let i = 0; i < o.runs; i++) {
        const due = t0 + (i / o.runs) * o.windowMs * 0.8;
        if (due > Date.now()) await sleep(due - Date.now());
        for (;;) {
          try {
            const { run } = await runs.start(
              'agent',
              { order: `PO-${i}`, amount: 100 + i },
              { idempotencyKey: `PO-${i}` },
            );
            if (i % 2 === 0) await runs.signal(run.id, 'approval', { by: 'early-operator' });
            break;
          } catch {
            await sleep(200); // the database may be restarting: the same key makes the retry safe
          }
        }
      }
    })();

    const signalled = new Set<string>();
    const deadline = t0 + o.windowMs + Math.max(120_000, o.runs * 150);
    let lastLog = 0;
    for (;;) {
      await sleep(300);
      try {
        const waiting = await api
          .get(RunRepository)
          .list({ status: 'waiting', limit: 500 })
          .then((p) =>
            p.items.filter((r) => r.parkedReason?.startsWith('waiting for signal') && !signalled.has(r.id)),
          );
        for (const r of waiting) {
          await runs.signal(r.id, 'approval', { by: 'operator' });
          signalled.add(r.id);
        }
        const c = new Client({ connectionString: pg.url });
        c.on('error', () => undefined);
        await c.connect();
        const [{ open, done, total }] = (
          await c.query(`select count(*) filter (where status not in ('succeeded','failed','cancelled','dead_lettered'))::int as open,
                                count(*) filter (where status = 'succeeded')::int as done, count(*)::int as total from ai_runs`)
        ).rows;
        await c.end();
        if (Date.now() - lastLog > 5000) {
          log(
            `t=${Math.round((Date.now() - t0) / 1000)}s succeeded ${done}/${o.runs}, faults so far ${JSON.stringify(applied)}`,
          );
          lastLog = Date.now();
        }
        const lastAt = faults[faults.length - 1]?.at ?? 0;
        const faultsDone = settled === faults.length && Date.now() - t0 > lastAt + 3000;
        if (open === 0 && faultsDone && total === o.runs) break;
      } catch (err) {
        log(`observer: ${(err as Error).message} (database restarting?)`);
      }
      if (Date.now() > deadline) {
        log('deadline reached: checking invariants on what is there');
        break;
      }
    }
    await arrivals;
  } finally {
    stopping = true;
    timers.forEach(clearTimeout);
    await Promise.all(
      slots.map(async (s) => {
        if (!s.child || s.child.exitCode !== null || s.child.signalCode) return;
        s.child.kill('SIGCONT');
        s.child.kill('SIGTERM');
        const exited = new Promise((r) => s.child!.once('exit', r));
        await Promise.race([exited, sleep(5000).then(() => s.child!.kill('SIGKILL'))]);
      }),
    );
  }
  if (existsSync(crashLog)) {
    for (const point of readFileSync(crashLog, 'utf8').split('\n').filter(Boolean))
      count(`crash point fired: ${point}`);
  }
  let invariants: InvariantResult[] = [];
  try {
    await api!.get(Reconciler).sweep(); // what the reconciler does after the last fault
    invariants = await checkInvariants(pg.url, { ...pay.effects(), ...notify.effects() });
    return await summarize(pg.url, o, applied, invariants, pay, notify, Date.now() - startedAt);
  } finally {
    await api?.close();
    await pay.close();
    await notify.close();
    await pg.dispose();
  }
}
