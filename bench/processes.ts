import 'reflect-metadata';
import { ChildProcess, execFileSync, fork } from 'node:child_process';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import path from 'node:path';
import { WAKE_CHANNEL } from '../src/durable-execution.constants';
import { startPgBouncer, PgBouncer } from '../test/pgbouncer/pgbouncer';
import { adminUrl, log, parseBenchArgs, runMeta } from './cli';
import { BenchDatabase, dropDatabase } from './database';
import type { PodStats } from './processes-worker';
import { quantile, sleep } from './stats';

/**
 * `npm run bench:processes [-- --quick|--smoke] [-- --out FILE]`: many pods, one primary (issue 38).
 * 1. What a step commit costs by how its statement is sent: named prepared statements on a direct
 *    connection, unnamed on a direct connection, unnamed through PgBouncer (transaction mode): one
 *    worker process, one run in flight, a long run, the modes interleaved; again with the database's
 *    `synchronous_commit = off` (no WAL flush: what is left is the statement's own cost).
 * 2. 1..32 worker OS processes ("pods", 2 runs in flight and a pool of 3 each) on one primary, direct
 *    (named) and through PgBouncer (unnamed, 8 server connections): runs/s, p50/p99 step commit, server
 *    connections, client connections per pod, and the knee (the first count that adds less than 10 %
 *    throughput). A count whose connections would take more than half of what the server has free is
 *    skipped (the server is shared: the tests and other benches need connections too).
 * A quiet machine gives figures worth comparing; under load, read the ratios.
 */

interface Config {
  repeat: number;
  counts: number[];
  costSteps: number;
  runSteps: number;
  runs: (k: number) => number;
}
const FULL: Config = {
  repeat: 3,
  counts: [1, 2, 4, 8, 16, 32],
  costSteps: 600,
  runSteps: 5,
  runs: (k) => Math.max(800, 120 * k),
};
const QUICK: Config = { ...FULL, repeat: 2, costSteps: 200, runs: (k) => Math.max(150, 25 * k) };
const SMOKE: Config = { ...QUICK, counts: [1, 2], costSteps: 40, runs: () => 30 };
const USAGE = `usage: npm run bench:processes -- [--quick|--smoke] [--repeat N] [--out FILE]
  DATABASE_URL admin connection (default postgres://root@127.0.0.1:5432/postgres); needs pgbouncer
               (apt-get install -y pgbouncer) for the PgBouncer rows`;

/** PgBouncer's server connections (for all pods together), and each pod's runs in flight (pool: + 1). */
const BOUNCER_POOL = 8;
const IN_FLIGHT = 2;

type Mode = 'direct-named' | 'direct-unnamed' | 'pgbouncer-unnamed';
const ROOT = path.join(__dirname, '..');

/** The worker entry compiled once (tsc, emit only): 32 processes must not each load ts-node. */
function compileWorker(): string {
  const out = path.join(ROOT, '.tmp', `bench-processes-${process.pid}`);
  const tsconfig = path.join(ROOT, '.tmp', `bench-processes-${process.pid}.json`);
  mkdirSync(out, { recursive: true });
  writeFileSync(
    tsconfig,
    JSON.stringify({
      extends: path.join(ROOT, 'tsconfig.json'),
      compilerOptions: { outDir: out, rootDir: ROOT, declaration: false, sourceMap: false, types: ['node'] },
      files: [path.join(__dirname, 'processes-worker.ts')],
      include: [],
    }),
  );
  execFileSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', tsconfig, '--noCheck'], {
    cwd: ROOT,
    stdio: 'inherit',
  });
  rmSync(tsconfig);
  const js = path.join(out, 'bench', 'processes-worker.js');
  if (!existsSync(js)) throw new Error(`no ${js}`);
  return js;
}

interface Pod {
  child: ChildProcess;
  stats(): Promise<PodStats>;
}

async function spawnPods(js: string, k: number, env: Record<string, string>): Promise<Pod[]> {
  const pods = Array.from({ length: k }, () => {
    const child = fork(js, [], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const ready = new Promise<void>((resolve, reject) => {
      child.once('message', () => resolve());
      child.once('exit', (code) => reject(new Error(`worker exited (${code}) before ready`)));
    });
    const stats = () =>
      new Promise<PodStats>((resolve) => {
        child.once('message', (m) => resolve(m as PodStats));
        child.send('stats');
      });
    return { child, ready, stats };
  });
  await Promise.all(pods.map((p) => p.ready));
  return pods;
}

async function stopPods(pods: Pod[]): Promise<void> {
  await Promise.all(
    pods.map(
      (p) =>
        new Promise<void>((resolve) => {
          const t = setTimeout(() => p.child.kill('SIGKILL'), 5000);
          p.child.once('exit', () => (clearTimeout(t), resolve()));
          p.child.send('stop');
        }),
    ),
  );
}

function envOf(mode: Mode, db: BenchDatabase, bouncer: PgBouncer | undefined, concurrency: number) {
  const pooled = mode === 'pgbouncer-unnamed';
  return {
    PB_URL: pooled ? bouncer!.via(db.url) : db.url,
    PB_DIRECT: pooled ? db.url : '',
    PB_NAMED: mode === 'direct-named' ? '1' : '0',
    PB_CONCURRENCY: String(concurrency),
    PB_POOL: String(concurrency + 1),
  };
}

/** Inserts `n` runs, wakes the workers, waits for all to succeed; also samples server connections. */
async function drive(db: BenchDatabase, n: number, steps: number): Promise<{ ms: number; backends: number }> {
  await db.insertPending(n, 'pb-steps', steps);
  const t0 = performance.now();
  await db.ctl.query(`select pg_notify($1, 'bench')`, [WAKE_CHANNEL]);
  let backends = 0;
  for (;;) {
    const { rows } = await db.ctl.query(
      `select (select count(*)::int from ai_runs where status = 'succeeded') as done,
              (select count(*)::int from pg_stat_activity where datname = current_database()) - 1 as backends`,
    );
    backends = Math.max(backends, rows[0].backends);
    if (rows[0].done >= n) return { ms: performance.now() - t0, backends };
    await sleep(50);
  }
}

const fmt = (x: number, d = 2) => (Number.isFinite(x) ? x.toFixed(d) : '-');

async function main(): Promise<void> {
  const {
    config,
    out,
    mode: benchMode,
  } = parseBenchArgs(
    process.argv.slice(2),
    USAGE,
    { full: FULL, quick: QUICK, smoke: SMOKE },
    path.join(__dirname, 'processes-results.json'),
  );
  const started = Date.now();
  const db = await BenchDatabase.create(adminUrl());
  let bouncer: PgBouncer | undefined;
  const results: Record<string, unknown> = { meta: runMeta(started, benchMode), loadavgAtStart: loadavg() };
  try {
    bouncer = await startPgBouncer(db.url, { poolSize: BOUNCER_POOL }).catch((err) => {
      log(`no PgBouncer (${(err as Error).message.split('\n')[0]}): its rows are skipped`);
      return undefined;
    });
    log('compiling the worker entry');
    const js = compileWorker();
    const modes: Mode[] = [
      'direct-named',
      'direct-unnamed',
      ...(bouncer ? ['pgbouncer-unnamed' as Mode] : []),
    ];

    // 1. Step commit cost: one process, one run in flight; with and without the WAL flush.
    console.log('\n1. Step commit (dx_step_write, client side), 1 process, 1 run in flight');
    console.log('synchronous_commit   mode                 commits   p50 ms   p99 ms   p50 / direct-named');
    const costRows: Array<Record<string, unknown>> = [];
    for (const sync of ['on', 'off']) {
      await db.ctl.query(`alter database ${db.name} set synchronous_commit = ${sync}`); // new sessions
      if (bouncer)
        bouncer = await bouncer.stop().then(() => startPgBouncer(db.url, { poolSize: BOUNCER_POOL })); // its too
      const cost: Record<Mode, number[]> = {
        'direct-named': [],
        'direct-unnamed': [],
        'pgbouncer-unnamed': [],
      };
      for (let r = 0; r < config.repeat; r++)
        for (const mode of r % 2 ? [...modes].reverse() : modes) {
          await db.reset();
          const pods = await spawnPods(js, 1, envOf(mode, db, bouncer, 1));
          await drive(db, 1, config.costSteps);
          const s = await pods[0].stats();
          cost[mode].push(...s.commits.slice(10)); // the first commits parse and plan: warm-up
          await stopPods(pods);
          const p50 = quantile(
            [...s.commits].sort((a, b) => a - b),
            0.5,
          );
          log(`cost ${sync} ${mode} repeat ${r + 1}: p50 ${fmt(p50, 3)} ms`);
        }
      const rows = modes.map((m) => {
        const sorted = [...cost[m]].sort((a, b) => a - b);
        return { sync, mode: m, n: sorted.length, p50: quantile(sorted, 0.5), p99: quantile(sorted, 0.99) };
      });
      for (const c of rows)
        console.log(
          `${sync.padEnd(18)}   ${c.mode.padEnd(20)} ${String(c.n).padStart(7)}   ${fmt(c.p50, 3).padStart(6)}   ${fmt(c.p99, 3).padStart(6)}   ${fmt(c.p50 / rows[0].p50)}`,
        );
      costRows.push(...rows);
    }
    await db.ctl.query(`alter database ${db.name} reset synchronous_commit`);
    results.stepCommit = costRows;

    // 2. Pods on one primary.
    const scaleModes: Mode[] = ['direct-named', ...(bouncer ? ['pgbouncer-unnamed' as Mode] : [])];
    const scale: Array<Record<string, unknown>> = [];
    // A shared server has a max_connections for everyone: a count whose connections would take more than
    // half of what is free is skipped (direct: K x (pool + LISTEN); PgBouncer: its pool + K LISTENs).
    const { rows: room } = await db.ctl.query(
      `select current_setting('max_connections')::int - (select count(*)::int from pg_stat_activity) as free`,
    );
    const budget = Math.floor(room[0].free / 2);
    const needs = (mode: Mode, k: number) =>
      mode === 'pgbouncer-unnamed' ? BOUNCER_POOL + k : k * (IN_FLIGHT + 2);
    results.connectionBudget = budget;
    console.log(
      `\n2. K worker processes x ${IN_FLIGHT} in flight (pool ${IN_FLIGHT + 1} each), ${config.runSteps}-step runs; PgBouncer: ${BOUNCER_POOL} server connections; budget ${budget} connections (half of what the server has free)`,
    );
    console.log(
      'mode                  K    runs   runs/s   p50 commit   p99 commit   server conns   client conns/pod',
    );
    for (const mode of scaleModes)
      for (const k of config.counts) {
        if (needs(mode, k) > budget) {
          console.log(
            `${mode.padEnd(20)} ${String(k).padStart(2)}   skipped: needs ${needs(mode, k)} connections`,
          );
          scale.push({ mode, k, skipped: `needs ${needs(mode, k)} connections, budget ${budget}` });
          continue;
        }
        await db.reset();
        const pods = await spawnPods(js, k, envOf(mode, db, bouncer, IN_FLIGHT));
        const n = config.runs(k);
        const { ms, backends } = await drive(db, n, config.runSteps);
        const stats = await Promise.all(pods.map((p) => p.stats()));
        await stopPods(pods);
        const commits = stats.flatMap((s) => s.commits).sort((a, b) => a - b);
        const perPod = Math.max(...stats.map((s) => s.poolMax)) + 1; // + the wake-up LISTEN connection
        const row = {
          mode,
          k,
          runs: n,
          runsPerSec: (n / ms) * 1000,
          p50: quantile(commits, 0.5),
          p99: quantile(commits, 0.99),
          serverConnections: backends,
          clientConnectionsPerPod: perPod,
          loadavg: loadavg()[0],
        };
        scale.push(row);
        console.log(
          `${mode.padEnd(20)} ${String(k).padStart(2)}   ${String(n).padStart(5)}   ${fmt(row.runsPerSec, 0).padStart(6)}   ${fmt(row.p50, 2).padStart(10)}   ${fmt(row.p99, 2).padStart(10)}   ${String(backends).padStart(12)}   ${String(perPod).padStart(16)}`,
        );
      }
    for (const mode of scaleModes) {
      const rows = scale.filter((r) => r.mode === mode && !r.skipped) as Array<{
        k: number;
        runsPerSec: number;
      }>;
      const knee = rows.find((r, i) => i > 0 && r.runsPerSec < rows[i - 1].runsPerSec * 1.1);
      console.log(`knee (${mode}): ${knee ? `K = ${knee.k} adds < 10 % runs/s` : 'not reached'}`);
      results[`knee.${mode}`] = knee?.k ?? null;
    }
    results.scale = scale;
    results.loadavgAtEnd = loadavg();
    writeFileSync(out, JSON.stringify(results, null, 2));
    log(`results: ${out}`);
  } finally {
    await bouncer?.stop();
    await db.ctl.end().catch(() => undefined);
    await dropDatabase(db.adminUrl, db.name);
    rmSync(path.join(ROOT, '.tmp', `bench-processes-${process.pid}`), { recursive: true, force: true });
  }
}

void main().catch((err) => {
  console.error(err);
  process.exit(1);
});
