/**
 * `npm run demo`: the chapter's incident replayed, naive versus durable, side by side.
 *
 * N purchase orders arrive over one run's length, so that when the deploy starts every run is in flight
 * at a different step (as the 1,900 runs were at 14:07). Each side has W worker processes and its own
 * copy of the simulated vendors. Then a rolling deploy replaces the workers of both sides one at a time,
 * in lockstep: start the new version, wait until it is ready, stop the old one with SIGTERM and a grace
 * period (every third one with SIGKILL, as a lost node or the OOM killer would). When every run has
 * finished, the vendors' ledgers say what each side cost.
 *
 *   npm run demo                      # default size, about two minutes on 2 cores
 *   npm run demo -- --runs 1900       # the chapter's 1,900 runs
 *   npm run demo -- --quick           # 60 runs, 2 workers per side
 *   npm run demo -- --inspect         # then the run inspector over the durable side's runs, until Ctrl-C
 *   npm run demo -- --screenshot docs # then screenshots of the inspector (a list, a run taken over)
 *   options: --workers W  --time-scale MS (per chapter second)  --report PATH  --no-report  --plain
 *            --inspect[=PORT] (default 3001)  --screenshot DIR
 */
import 'reflect-metadata';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Pool } from 'pg';
import { DurableExecutionModule, RunRepository } from '../../src';
import { activationsByOrder, DURABLE_ACCOUNTS, ensureAccountTables, NAIVE_ACCOUNTS } from './accounts';
import { CHAPTER_FIGURES, nominalRunMs, workerTimings, type ServiceSettings } from './config';
import { ADMIN_PATH, demoAdminAccess, describeAccess } from './inspector/admin-access';
import { captureInspector, type Capture } from './inspector/capture';
import { createInspectorApp } from './inspector/inspector-app';
import { InMemoryQueue } from './naive/queue';
import { prepareWorkerRuntime } from './orchestrator/compile';
import { openDemoDatabase } from './orchestrator/database';
import { spawnWorker, stopWorker, type Side, type WorkerHandle } from './orchestrator/fleet';
import { ProgressView, type Snapshot } from './orchestrator/progress';
import { fromLedger, renderTable, type DemoReport } from './orchestrator/report';
import { onShutdown, runCleanups, shutdownSignal } from './orchestrator/shutdown';
import type { PurchaseOrderInput } from './purchase-order.agent';
import { durableOptions, PurchaseOrderModule } from './purchase-order.module';
import { startSimulatedServices } from './simulated/services';

export interface DemoOptions {
  runs: number;
  /** Worker processes per side. */
  workers: number;
  /** Real milliseconds per chapter second. Default: see `defaultTimeScale`. */
  timeScaleMs: number;
  /** Server to use; default `DATABASE_URL`, else an embedded PostgreSQL. */
  databaseUrl?: string;
  /** Run in `databaseUrl` itself rather than in a database of its own created on that server. */
  databaseAsIs?: boolean;
  /** Where to write the JSON report; null for none. */
  reportPath: string | null;
  progress: 'auto' | 'tty' | 'plain' | 'silent';
  out: NodeJS.WritableStream;
  /** Every `sigkillEvery`-th replacement (the 2nd, 5th, ...) is a SIGKILL. Default 3; 0 for none. */
  sigkillEvery: number;
  /** Give up waiting for the runs after this long (ms). */
  timeoutMs?: number;
  /**
   * After the report, serve the run inspector (`DurableAdminModule`) over the durable side's database on
   * this port (0: any free one) and keep the database: the result's `inspector.close()` (or Ctrl-C) ends
   * both. Access: DEMO_ADMIN_KEY, DEMO_ADMIN_ANONYMOUS=1 or a key made for the process (admin-access.ts).
   */
  inspect?: { port: number } | null;
  /** After the report, save screenshots of the inspector in this directory (see inspector/capture.ts). */
  screenshotDir?: string | null;
}

/** The inspector left running by `inspect`. */
export interface DemoInspector {
  /** The inspector page, e.g. `http://127.0.0.1:3001/durable`. */
  url: string;
  /** The key it asks for (`x-api-key`); null when anonymous. */
  key: string | null;
  /** What to print: the sign-in link and the API. */
  lines: string[];
  /** Stops the inspector, the simulated services and the demo's database. */
  close(): Promise<void>;
}

export type DemoResult = DemoReport & { inspector?: DemoInspector; screenshots?: Capture };

export const DEFAULT_RUNS = 500;

/**
 * 40 ms per chapter second (a run takes about 14 s) up to 200 runs; above that the scale grows with N
 * (100 ms at the default 500 runs: a run takes about 36 s) so that orders arrive at about 5 a second
 * per side, which 2 cores absorb without stretching the runs.
 */
export function defaultTimeScale(runs: number): number {
  return Math.max(40, Math.round(runs / 5));
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const TEXTS = [
  'Please order the attached 240 lines for the Rotterdam site, standard delivery, invoice to accounts payable.',
  'Re-order of last quarter’s fasteners and bearings (240 lines), deliver to Lyon, urgent if possible.',
  'Quarterly maintenance stock, 240 lines as listed below, ship to the Gdańsk warehouse.',
];

function makeOrder(prefix: string, i: number): PurchaseOrderInput {
  const channels = ['portal', 'email', 'edi'] as const;
  return { orderRef: `${prefix}${String(i).padStart(4, '0')}`, channel: channels[i % 3], text: TEXTS[i % 3] };
}

function apiModule(databaseUrl: string, timeScaleMs: number, services: ServiceSettings) {
  // The orchestrator only starts runs (worker and reconciler off): an "API pod".
  @Module({
    imports: [
      DurableExecutionModule.forRoot(
        durableOptions({ databaseUrl, timeScaleMs, worker: false, poolSize: 4 }),
      ),
      PurchaseOrderModule.register(services),
    ],
  })
  class DemoApiModule {}
  return DemoApiModule;
}

export async function runDemo(partial: Partial<DemoOptions> = {}): Promise<DemoResult> {
  const runsN = partial.runs ?? DEFAULT_RUNS;
  const o: DemoOptions = {
    runs: runsN,
    workers: partial.workers ?? 4,
    timeScaleMs: partial.timeScaleMs ?? defaultTimeScale(runsN),
    databaseUrl: partial.databaseUrl ?? process.env.DATABASE_URL,
    databaseAsIs: partial.databaseAsIs,
    reportPath:
      partial.reportPath === undefined ? path.join(__dirname, 'demo-report.json') : partial.reportPath,
    progress: partial.progress ?? 'auto',
    out: partial.out ?? process.stdout,
    sigkillEvery: partial.sigkillEvery ?? 3,
    timeoutMs: partial.timeoutMs,
    inspect: partial.inspect ?? null,
    screenshotDir: partial.screenshotDir ?? null,
  };
  const N = o.runs;
  const W = o.workers;
  const t = workerTimings(o.timeScaleMs);
  const runMs = nominalRunMs(o.timeScaleMs);
  const drainMs = t.drainMs;
  const concurrency = Math.min(10_000, Math.ceil((N / W) * 1.5) + 5);
  const view = new ProgressView(o.out, o.progress);
  const note = (s: string) => view.note(s);
  const t0 = Date.now();
  const logDir = fs.mkdtempSync(path.join(os.tmpdir(), 'po-demo-logs-'));
  for (const d of fs.readdirSync(os.tmpdir()).filter((x) => x.startsWith('po-demo-logs-'))) {
    const p = path.join(os.tmpdir(), d);
    if (Date.now() - fs.statSync(p).mtimeMs > 3_600_000) fs.rmSync(p, { recursive: true, force: true }); // old demos'
  }

  note(
    `purchase-order demo: ${N} runs of the chapter's 9-step agent (~${(runMs / 1000).toFixed(1)} s each here, ` +
      `1 chapter second = ${o.timeScaleMs} ms), ${W} workers per side, naive and durable side by side.`,
  );
  const db = await openDemoDatabase({ databaseUrl: o.databaseUrl, asIs: o.databaseAsIs, log: note });
  onShutdown(() => db.close());
  await ensureAccountTables(db.url); // the app's own tables, both sides' (its migration, before any worker)
  const workers: WorkerHandle[] = [];
  const deaths = new Map<string, number>();
  let apiClose: (() => Promise<void>) | undefined;
  let stats: Pool | undefined;
  let keepDatabase = false;
  const stopFleet = async () => {
    for (const w of workers) if (w.alive) w.child.kill('SIGTERM');
    await Promise.race([
      Promise.all(workers.map((w) => w.exited)),
      new Promise((r) => setTimeout(r, 5000).unref()),
    ]);
    for (const w of workers) if (w.alive) w.child.kill('SIGKILL');
    await apiClose?.().catch(() => undefined);
    apiClose = undefined;
  };
  try {
    const naiveSvc = await startSimulatedServices({ timeScaleMs: o.timeScaleMs });
    onShutdown(() => naiveSvc.close());
    const durableSvc = await startSimulatedServices({ timeScaleMs: o.timeScaleMs });
    onShutdown(() => durableSvc.close());

    const api = await NestFactory.createApplicationContext(
      apiModule(db.url, o.timeScaleMs, durableSvc.settings),
      { logger: ['error', 'warn'] },
    );
    apiClose = () => api.close();
    onShutdown(() => api.close());
    const runs = api.get(RunRepository);
    stats = new Pool({ connectionString: db.url, max: 2 });
    stats.on('error', () => undefined);
    const pool = stats;
    onShutdown(async () => {
      for (const w of workers) if (w.alive) w.child.kill('SIGKILL');
    });

    const queue = new InMemoryQueue();
    const runtime = prepareWorkerRuntime();
    const spawn = (side: Side, i: number, version: number) => {
      const name = `${side}-${i}.v${version}`;
      const deferred = version > 1; // the new version is pulled and loaded before the rollout starts
      const env =
        side === 'durable'
          ? {
              databaseUrl: db.url,
              timeScaleMs: o.timeScaleMs,
              concurrency,
              workerId: name,
              services: durableSvc.settings,
              deferred,
            }
          : { services: naiveSvc.settings, databaseUrl: db.url, drainMs, deferred };
      const w = spawnWorker(runtime, side, name, version, env, logDir);
      workers.push(w);
      if (side === 'naive')
        void w.ready.then(
          () => queue.attach(name, w.child, concurrency),
          () => undefined,
        );
      void w.exited.then(({ at }) => {
        deaths.set(name, at);
        if (side === 'naive') queue.detach(name);
      });
      return w;
    };
    const v1 = { naive: [] as WorkerHandle[], durable: [] as WorkerHandle[] };
    const v2 = { naive: [] as WorkerHandle[], durable: [] as WorkerHandle[] };
    for (let i = 1; i <= W; i++) {
      v1.naive.push(spawn('naive', i, 1));
      v1.durable.push(spawn('durable', i, 1));
    }
    note(`starting ${2 * W} worker processes, loading ${2 * W} of the next version (logs in ${logDir})`);
    await Promise.all(workers.map((w) => w.ready));
    for (let i = 1; i <= W; i++) {
      v2.naive.push(spawn('naive', i, 2));
      v2.durable.push(spawn('durable', i, 2));
    }
    await Promise.all([...v2.naive, ...v2.durable].map((w) => w.loaded));

    // Live state for the progress view.
    let phase = 'orders arriving';
    const deploy = { replaced: 0, total: W, current: null as string | null };
    let submitted = 0;
    let durableByStatus: Record<string, number> = {};
    let durableResumed = 0;
    const refLike = `${db.refPrefix}%`;
    const poll = async () => {
      const { rows } = await pool.query(
        `select status, count(*)::int as n, count(*) filter (where epoch > 1)::int as resumed
           from ai_runs where kind = 'purchase-order' and idempotency_key like $1 group by status`,
        [refLike],
      );
      durableByStatus = Object.fromEntries(rows.map((r) => [r.status, r.n]));
      durableResumed = rows.reduce((s, r) => s + r.resumed, 0);
    };
    const alive = (side: Side) => workers.filter((w) => w.side === side && w.alive);
    const terminal = () =>
      ['succeeded', 'failed', 'cancelled', 'dead_lettered'].reduce(
        (s, k) => s + (durableByStatus[k] ?? 0),
        0,
      );
    const snapshot = (): Snapshot => ({
      elapsedMs: Date.now() - t0,
      phase,
      runs: N,
      submitted,
      workers: W,
      naive: {
        done: queue.done,
        active: queue.inFlight,
        waiting: queue.queued,
        recovered: queue.redeliveries,
        duplicateEnquiries: naiveSvc.ledger.duplicateEnquiries,
        duplicateCharges: naiveSvc.ledger.duplicateCharges,
        workersAlive: alive('naive').length,
        workersNew: alive('naive').filter((w) => w.version > 1).length,
      },
      durable: {
        byStatus: durableByStatus,
        done: terminal(),
        active: durableByStatus.running ?? 0,
        waiting: (durableByStatus.pending ?? 0) + (durableByStatus.waiting ?? 0),
        recovered: durableResumed,
        duplicateEnquiries: durableSvc.ledger.duplicateEnquiries,
        duplicateCharges: durableSvc.ledger.duplicateCharges,
        workersAlive: alive('durable').length,
        workersNew: alive('durable').filter((w) => w.version > 1).length,
      },
      deploy,
    });
    let polling = false;
    const ticker = setInterval(() => {
      if (polling) return;
      polling = true;
      poll()
        .catch(() => undefined)
        .finally(() => {
          polling = false;
          view.update(snapshot());
        });
    }, 250);
    onShutdown(() => clearInterval(ticker));

    // Orders arrive evenly over one run's length, on both sides at once.
    const orders = Array.from({ length: N }, (_, i) => makeOrder(db.refPrefix, i + 1));
    const startAt = Date.now();
    const starts: Promise<unknown>[] = [];
    const startErrors: string[] = [];
    while (submitted < N) {
      const due = Math.min(N, Math.floor(((Date.now() - startAt) / runMs) * N) + 1);
      while (submitted < due) {
        const order = orders[submitted++];
        queue.publish(order);
        starts.push(
          runs
            .start('purchase-order', order, { idempotencyKey: order.orderRef })
            .catch((err: Error) => startErrors.push(`${order.orderRef}: ${err.message}`)),
        );
      }
      await sleep(20);
    }
    await Promise.all(starts);
    if (startErrors.length) throw new Error(`could not start runs: ${startErrors.slice(0, 3).join('; ')}`);
    await sleep(Math.max(0, startAt + runMs - Date.now()));

    // The rolling deploy: one worker of each side at a time.
    phase = 'rolling deploy';
    const deployLog: {
      worker: number;
      signal: string;
      atMs: number;
      naiveExit: string;
      durableExit: string;
    }[] = [];
    note(
      `${((Date.now() - t0) / 1000).toFixed(1)} s: rolling deploy of ${W} workers per side ` +
        `(grace ${(t.graceMs / 1000).toFixed(1)} s, drain ${(drainMs / 1000).toFixed(1)} s` +
        `${o.sigkillEvery ? `, every ${o.sigkillEvery}rd replacement SIGKILLed` : ''})`,
    );
    for (let i = 0; i < W; i++) {
      const how = o.sigkillEvery && i % o.sigkillEvery === 1 ? 'SIGKILL' : 'SIGTERM';
      deploy.current = `starting naive-${i + 1}.v2 and durable-${i + 1}.v2`;
      const fresh = [v2.naive[i], v2.durable[i]];
      for (const f of fresh) f.start();
      await Promise.all(fresh.map((f) => f.ready));
      deploy.current = `${how} to naive-${i + 1}.v1 and durable-${i + 1}.v1`;
      const atMs = Date.now() - t0;
      await Promise.all([stopWorker(v1.naive[i], how, t.graceMs), stopWorker(v1.durable[i], how, t.graceMs)]);
      const ex = async (w: WorkerHandle) => {
        const e = await w.exited;
        return e.signal ?? `exit ${e.code}`;
      };
      deployLog.push({
        worker: i + 1,
        signal: how,
        atMs,
        naiveExit: await ex(v1.naive[i]),
        durableExit: await ex(v1.durable[i]),
      });
      deploy.replaced++;
    }
    deploy.current = null;

    phase = 'finishing';
    const deadline = Date.now() + (o.timeoutMs ?? 10 * runMs + 120_000);
    while (Date.now() < deadline) {
      await poll().catch(() => undefined);
      if (queue.done >= N && terminal() >= N) break;
      await sleep(250);
    }
    phase = queue.done >= N && terminal() >= N ? 'done' : 'timed out';
    clearInterval(ticker);
    await poll().catch(() => undefined);
    view.update(snapshot(), true);
    view.finish();

    // Durable side: interruptions and recoveries from the event trail.
    const { rows: events } = await pool.query(
      `select e.run_id, e.event_type, e.epoch, e.payload, extract(epoch from e.created_at) * 1000 as at
         from ai_events e join ai_runs r on r.id = e.run_id
        where r.kind = 'purchase-order' and r.idempotency_key like $1
          and e.event_type in ('run.claimed', 'run.released', 'run.reconciled')
        order by e.run_id, e.id`,
      [refLike],
    );
    const durableDelays: number[] = [];
    const interrupted = new Set<string>();
    let resumedClaims = 0;
    let since: number | null = null;
    let current = '';
    for (const e of events) {
      if (e.run_id !== current) {
        current = e.run_id;
        since = null;
      }
      const at = Number(e.at);
      if (e.event_type === 'run.released') {
        interrupted.add(e.run_id);
        since ??= at;
      } else if (e.event_type === 'run.reconciled') {
        interrupted.add(e.run_id);
        const died = deaths.get(String(e.payload?.previousWorker));
        since ??= died !== undefined && died <= at ? died : at;
      } else if (e.event_type === 'run.claimed' && since !== null) {
        durableDelays.push(at - since);
        resumedClaims++;
        since = null;
      }
    }
    const { rows: outcome } = await pool.query(
      `select count(*) filter (where status = 'succeeded')::int as completed,
              count(*) filter (where output->>'status' = 'declined')::int as declined
         from ai_runs where kind = 'purchase-order' and idempotency_key like $1`,
      [refLike],
    );
    const { rows: unfinished } = await pool.query(
      `select status, error->>'message' as message, count(*)::int as n from ai_runs
        where kind = 'purchase-order' and idempotency_key like $1 and status <> 'succeeded'
        group by 1, 2 order by 3 desc limit 5`,
      [refLike],
    );
    for (const u of unfinished)
      console.error(`durable runs not succeeded: ${u.n} ${u.status}: ${u.message ?? ''}`);
    const { rows: usage } = await pool.query(
      `select count(*)::int as checkpoints, coalesce(sum((c.meta->'usage'->>'prompt_tokens')::bigint), 0)::bigint as prompt
         from ai_checkpoints c join ai_runs r on r.id = c.run_id
        where r.idempotency_key like $1 and c.step_name = 'parse_request'`,
      [refLike],
    );
    const { rows: resolved } = await pool.query(
      `select count(*)::int as n from ai_events e join ai_runs r on r.id = e.run_id
        where r.idempotency_key like $1 and e.event_type = 'command.resolved'`,
      [refLike],
    );

    const { rows: untouched } = await pool.query(
      `select extract(epoch from finished_at - created_at) * 1000 as ms from ai_runs
        where kind = 'purchase-order' and idempotency_key like $1 and status = 'succeeded' and epoch = 1`,
      [refLike],
    );
    // Account activations: rows of each side's own table, per order.
    const naiveActivations = await activationsByOrder(pool, NAIVE_ACCOUNTS, db.refPrefix);
    const durableActivations = await activationsByOrder(pool, DURABLE_ACCOUNTS, db.refPrefix);
    const refs = orders.map((x) => x.orderRef);
    const naiveMsgs = [...queue.messages.values()];
    const report: DemoReport = {
      scenario: {
        runs: N,
        workersPerSide: W,
        timeScaleMs: o.timeScaleMs,
        nominalRunMs: runMs,
        graceMs: t.graceMs,
        drainTimeoutMs: drainMs,
        leaseTtlMs: t.leaseTtlMs,
        heartbeatMs: t.heartbeatMs,
        reconcilerIntervalMs: t.reconcilerIntervalMs,
        concurrencyPerWorker: concurrency,
        deploy: deployLog,
        database: db.source,
        outcome: phase,
        startedAt: new Date(t0).toISOString(),
        durationMs: Date.now() - t0,
        machine: { cpus: os.cpus().length, node: process.version },
      },
      naive: fromLedger(naiveSvc.ledger, refs, {
        completed: queue.done,
        declined: naiveMsgs.filter((m) => m.declined).length,
        interruptedRuns: naiveMsgs.filter((m) => m.interruptions > 0).length,
        pickedUpAgain: queue.redeliveries,
        recoveryDelaysMs: naiveMsgs.flatMap((m) => m.recoveryDelaysMs),
        uninterruptedRunMs: naiveMsgs
          .filter((m) => m.interruptions === 0 && m.doneAt && m.firstDeliveredAt)
          .map((m) => m.doneAt! - m.firstDeliveredAt!),
        activations: naiveActivations,
      }),
      durable: fromLedger(durableSvc.ledger, refs, {
        completed: outcome[0].completed,
        declined: outcome[0].declined,
        interruptedRuns: interrupted.size,
        pickedUpAgain: resumedClaims,
        recoveryDelaysMs: durableDelays,
        uninterruptedRunMs: untouched.map((r) => Number(r.ms)),
        activations: durableActivations,
      }),
      chapter: CHAPTER_FIGURES,
      extra: {
        durableStatuses: durableByStatus,
        modelUsageRecordedInCheckpoints: {
          checkpoints: usage[0].checkpoints,
          promptTokens: Number(usage[0].prompt),
        },
        inDoubtCommandsResolvedByLookup: resolved[0].n,
        workerLogs: logDir,
      },
    };

    o.out.write(`\n${renderTable(report)}\n\n`);
    o.out.write(
      `Durable "steps executed again" are the steps in flight when a worker was stopped (a model call or a\n` +
        `price batch cut off mid-way); an external write in flight was settled by asking the vendor by key.\n` +
        `Account activations are rows of each side's own table, one per activation; the durable side writes\n` +
        `them in the transaction that commits the step's checkpoint, so they commit once.\n` +
        `Recovery delay: from the interruption until the run was back at the step it had reached (here,\n` +
        `1 chapter second = ${o.timeScaleMs} ms). The chapter's figures are for 1,900 runs in flight on 40 pods\n` +
        `at 14:07; this run's are measured.\n`,
    );
    if (o.reportPath) {
      fs.writeFileSync(o.reportPath, JSON.stringify(report, null, 2));
      o.out.write(`JSON report: ${path.relative(process.cwd(), o.reportPath) || o.reportPath}\n`);
    }
    if (!o.inspect && !o.screenshotDir) return report;

    // The durable side's runs in the run inspector. Nothing runs any more: the fleets go, the database stays.
    await stopFleet();
    const access = o.inspect ? demoAdminAccess() : demoAdminAccess({}); // screenshots only: a key of its own
    const inspector = await createInspectorApp({ databaseUrl: db.url, access });
    onShutdown(() => inspector.close());
    await inspector.listen(o.inspect?.port ?? 0, '127.0.0.1');
    const origin = await inspector.getUrl();
    const url = `${origin}/${ADMIN_PATH}`;
    const result: DemoResult = report;
    if (o.screenshotDir) {
      const shot = await captureInspector({
        url,
        key: access.key,
        outDir: o.screenshotDir,
        preferTakeoverFrom: deployLog
          .filter((d) => d.signal === 'SIGKILL')
          .map((d) => `durable-${d.worker}.v1`),
      });
      const rel = (p: string) => path.relative(process.cwd(), p) || p;
      o.out.write(
        `Screenshots of the run inspector: ${rel(shot.runsPng)} (the runs), ${rel(shot.runPng)} ` +
          `(${shot.orderRef ?? shot.runId}: ${shot.shows})\n`,
      );
      result.screenshots = shot;
    }
    if (o.inspect) {
      keepDatabase = true;
      result.inspector = { url, key: access.key, lines: describeAccess(origin, access), close: runCleanups };
    }
    return result;
  } finally {
    await stopFleet();
    await stats?.end().catch(() => undefined);
    if (!keepDatabase) await runCleanups();
  }
}

function parseArgs(argv: string[]): Partial<DemoOptions> {
  const out: Partial<DemoOptions> = {};
  const num = (flag: string, v: string | undefined) => {
    const n = Number(v);
    if (!Number.isFinite(n) || n <= 0) throw new Error(`${flag} needs a positive number, got ${v}`);
    return n;
  };
  if (process.env.npm_config_runs) out.runs = num('--runs', process.env.npm_config_runs);
  if (process.env.npm_config_quick) argv = ['--quick', ...argv];
  if (process.env.npm_config_inspect) argv = [`--inspect=${process.env.npm_config_inspect}`, ...argv];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const [flag, inline] = a.split('=');
    const value = () => inline ?? argv[++i];
    if (flag === '--runs') out.runs = Math.round(num(flag, value()));
    else if (flag === '--workers') out.workers = Math.round(num(flag, value()));
    else if (flag === '--time-scale') out.timeScaleMs = num(flag, value());
    else if (flag === '--report') out.reportPath = path.resolve(value());
    else if (flag === '--no-report') out.reportPath = null;
    else if (flag === '--plain') out.progress = 'plain';
    else if (flag === '--quick') Object.assign(out, { runs: out.runs ?? 60, workers: 2, timeScaleMs: 15 });
    else if (flag === '--inspect') {
      // --inspect, --inspect=PORT or --inspect PORT (npm turns a bare `--inspect` into "true")
      const v = inline ?? (/^\d+$/.test(argv[i + 1] ?? '') ? argv[++i] : undefined);
      const port = v === undefined || v === 'true' ? 3001 : Number(v);
      if (!Number.isInteger(port) || port < 0 || port > 65535)
        throw new Error(`--inspect takes a port, got ${v}`);
      out.inspect = { port };
    } else if (flag === '--screenshot') out.screenshotDir = path.resolve(value());
    else if (flag === '--help' || flag === '-h') {
      process.stdout.write(
        'npm run demo -- [--runs N] [--quick] [--workers W] [--time-scale MS] [--report PATH | --no-report] [--plain]\n' +
          '                [--inspect[=PORT]] [--screenshot DIR]\n',
      );
      process.exit(0);
    } else throw new Error(`unknown option ${a} (try --help)`);
  }
  return out;
}

if (require.main === module) {
  runDemo(parseArgs(process.argv.slice(2)))
    .then((r) => {
      const ok =
        r.durable.charges.duplicate === 0 &&
        r.durable.creditEnquiries.duplicate === 0 &&
        r.durable.accountActivations.duplicate === 0;
      if (r.inspector) {
        // Served until Ctrl-C, which stops the inspector and the demo's database (shutdown.ts).
        process.stdout.write(`\n${r.inspector.lines.join('\n')}\nCtrl-C stops it and the demo's database.\n`);
        return;
      }
      process.exit(ok && r.durable.completed === r.durable.runs ? 0 : 1);
    })
    .catch((err) => {
      if (shutdownSignal()) return; // interrupted: the shutdown handler exits once everything is stopped
      console.error(err);
      process.exit(1);
    });
}
