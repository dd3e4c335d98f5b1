/**
 * `npm run example:rolling-deploy`: a rolling deploy that changes a workflow under runs in flight.
 *
 * Old pods run version 1 of `order` (triage, wait for approval, fulfil). Orders arrive through an API
 * process that runs no worker (their runs are pinned by their first claim); some are approved, so that
 * when the deploy starts some runs wait for a person and some are in the middle of `fulfil`. Then each old
 * pod is replaced by a new one that registers version 2 (a fraud check inserted before the wait) **and**
 * keeps the version-1 class: start the new pod, wait until it is ready, stop the old one (a SIGTERM drain;
 * the last one SIGKILLed, as a lost node). More orders arrive during and after the deploy. Then every
 * waiting order is approved. The report says which version and path each run took, which steps it
 * recorded, and how many were taken over from a stopped pod; the example fails (exit 1) when a run did
 * not succeed, took another path than its version, or hit non-determinism.
 *
 *   npm run example:rolling-deploy                   # 40 orders, 2 pods; DATABASE_URL or an embedded PostgreSQL
 *   npm run example:rolling-deploy -- --orders 200 --pods 3
 */
import 'reflect-metadata';
import { ChildProcess, fork } from 'node:child_process';
import path from 'node:path';
import { DynamicModule, INestApplicationContext, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { DurableExecutionModule, RunRepository, RunView } from '../../src';
import { openDemoDatabase } from '../purchase-order/orchestrator/database';
import type { Order } from './order.workflows';

/** Options of `runRollingDeploy`. */
export interface RollingDeployOptions {
  /** A server to use (a database of its own is created on it); default DATABASE_URL, else embedded. */
  databaseUrl?: string;
  /** Use `databaseUrl` itself (a fresh database, e.g. a test's). */
  asIs?: boolean;
  /** Orders in all (default 40): half before the deploy, a quarter during it, a quarter after. */
  orders?: number;
  /** Pods of each build (default 2). */
  pods?: number;
  /** Where the report's lines go (default stdout). */
  out?: (line: string) => void;
  /** Starts a pod process from pod.ts with `env` (default: fork through ts-node). */
  spawnPod?: (env: Record<string, string>) => ChildProcess;
}

/** One run as the report shows it. */
export interface RolloutRun {
  ref: string;
  id: string;
  version: number | null;
  path: string | null;
  status: string;
  /** The names of its checkpoints, in order. */
  steps: string[];
  /** The pods that claimed it, in order. */
  pods: string[];
  /** Handed on by a pod that stopped (`run.released` by its drain, `run.reconciled` after a SIGKILL). */
  handedOn: boolean;
}

/** What `runRollingDeploy` measured. */
export interface RollingDeployReport {
  runs: RolloutRun[];
  /** Runs that hit non-determinism (held or failed with DURABLE_NON_DETERMINISM). */
  nonDeterminism: number;
  /** Runs claimed by an old pod and a new one (they crossed the deploy). */
  crossed: number;
  /** Runs a stopping pod handed on (its drain) or lost (SIGKILL, recovered when the lease ran out). */
  handedOn: number;
  /** Unfinished runs pinned to version 1 after the deploy (0: the v1 class can go). */
  v1Left: number;
  /** Every run succeeded on its version's path and none hit non-determinism. */
  ok: boolean;
}

/** The API process: starts runs and sends approvals; runs no worker and registers no version. */
@Module({})
class ApiModule {
  static on(url: string): DynamicModule {
    const durable = DurableExecutionModule.forRoot({
      database: { url },
      worker: { enabled: false },
      reconciler: { enabled: false },
    });
    return { module: ApiModule, imports: [durable] };
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function defaultSpawn(env: Record<string, string>): ChildProcess {
  return fork(path.join(__dirname, 'pod.ts'), [], {
    execArgv: ['-r', 'ts-node/register/transpile-only'],
    env: { ...process.env, ...env },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
}

/** A pod process, ready when it has booted. */
class Pod {
  readonly exited: Promise<void>;
  constructor(
    readonly id: string,
    readonly child: ChildProcess,
  ) {
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
  }
  ready(): Promise<void> {
    return new Promise((resolve, reject) => {
      this.child.once('message', () => resolve());
      void this.exited.then(() => reject(new Error(`pod ${this.id} exited before it was ready`)));
    });
  }
}

/** Runs the rolling deploy and returns its report (the pods are stopped and the database closed). */
export async function runRollingDeploy(opts: RollingDeployOptions = {}): Promise<RollingDeployReport> {
  const out = opts.out ?? ((l: string) => process.stdout.write(`${l}\n`));
  const total = opts.orders ?? 40;
  const podCount = opts.pods ?? 2;
  const spawnPod = opts.spawnPod ?? defaultSpawn;
  const db = await openDemoDatabase({
    databaseUrl: opts.databaseUrl ?? process.env.DATABASE_URL,
    asIs: opts.asIs,
    label: 'rolling-deploy',
    log: out,
  });
  const pods: Pod[] = [];
  let api: INestApplicationContext | undefined;
  try {
    api = await NestFactory.createApplicationContext(ApiModule.on(db.url), { logger: ['error'] });
    const runs = api.get(RunRepository);
    const startPod = async (id: string, versions: string) => {
      const pod = new Pod(id, spawnPod({ DB_URL: db.url, POD_ID: id, POD_VERSIONS: versions }));
      pods.push(pod);
      await pod.ready();
      return pod;
    };
    const ids: string[] = [];
    const order = async (n: number) => {
      const o: Order = { ref: `${db.refPrefix}${String(n).padStart(4, '0')}`, amount: (n * 137) % 1000 };
      ids.push((await runs.start('order', o, { idempotencyKey: o.ref })).run.id);
    };
    const waiting = async () =>
      (await runs.list({ kind: 'order', status: 'waiting', limit: 500 })).items.map((r) => r.id);
    const approve = async (share: number) => {
      const ready = await waiting();
      for (const id of ready.slice(0, Math.ceil(ready.length * share))) await runs.signal(id, 'approve');
    };
    const until = async (check: () => Promise<boolean>, what: string, ms = 120_000) => {
      for (const end = Date.now() + ms; Date.now() < end; await sleep(200)) if (await check()) return;
      throw new Error(`timed out waiting for ${what}`);
    };

    out(`rolling deploy of 'order' v1 → v2 on ${db.source}: ${total} orders, ${podCount} pods per build`);
    const old = [];
    for (let i = 0; i < podCount; i++) old.push(await startPod(`old-${i}`, '1'));
    const before = Math.floor(total / 2);
    for (let n = 0; n < before; n++) await order(n);
    await until(async () => (await waiting()).length === before, 'the first orders to wait for approval');
    await approve(0.4); // these are in `fulfil` when the deploy begins
    let n = before;
    const during = Math.floor(total / 4);
    for (let i = 0; i < podCount; i++) {
      await startPod(`new-${i}`, '1,2');
      for (const end = n + Math.ceil(during / podCount); n < Math.min(end, before + during); n++)
        await order(n);
      await approve(0.3);
      const kill = i === podCount - 1;
      old[i].child.kill(kill ? 'SIGKILL' : 'SIGTERM');
      await old[i].exited;
      out(`  ${old[i].id} ${kill ? 'SIGKILLed' : 'drained (SIGTERM)'}, new-${i} (v1 + v2) serving`);
    }
    for (; n < total; n++) await order(n);
    await until(async () => {
      const ended = (await Promise.all(ids.map((id) => runs.get(id)))).filter(
        (r) => r && ['succeeded', 'failed', 'cancelled', 'dead_lettered'].includes(r.status),
      ).length;
      if (ended < ids.length) await approve(1);
      return ended === ids.length;
    }, 'every order to finish');

    const report = await reportOf(runs, ids);
    print(out, report);
    return report;
  } finally {
    for (const p of pods) p.child.kill('SIGKILL');
    await Promise.all(pods.map((p) => p.exited));
    await api?.close();
    await db.close();
  }
}

async function reportOf(runs: RunRepository, ids: string[]): Promise<RollingDeployReport> {
  const rows: RolloutRun[] = [];
  let nonDeterminism = 0;
  for (const id of ids) {
    const run = (await runs.get(id)) as RunView<Order, { path: string }>;
    const events = await runs.events(id);
    if (events.some((e) => e.type === 'run.held') || run.error?.code === 'DURABLE_NON_DETERMINISM')
      nonDeterminism++;
    rows.push({
      ref: run.input.ref,
      id,
      version: run.version,
      path: run.output?.path ?? null,
      status: run.status,
      steps: (await runs.checkpoints(id)).map((c) => c.stepName),
      pods: events.filter((e) => e.type === 'run.claimed').map((e) => String(e.payload.workerId)),
      handedOn: events.some((e) => e.type === 'run.released' || e.type === 'run.reconciled'),
    });
  }
  const v1Left = (await runs.versions('order'))
    .filter((v) => v.version === 1)
    .reduce((a, v) => a + v.pending + v.waiting + v.running, 0);
  const ok =
    nonDeterminism === 0 && rows.every((r) => r.status === 'succeeded' && r.path === `v${r.version}`);
  return {
    runs: rows,
    nonDeterminism,
    crossed: rows.filter(crossed).length,
    handedOn: rows.filter((r) => r.handedOn).length,
    v1Left,
    ok,
  };
}

/** Claimed by a pod of the old build and one of the new. */
const crossed = (r: RolloutRun) =>
  r.pods.some((p) => p.startsWith('old-')) && r.pods.some((p) => p.startsWith('new-'));

/** A run's recorded steps as a person reads them: the wait by its signal, internal records left out. */
const stepsOf = (r: RolloutRun) =>
  r.steps
    .filter((s) => !s.startsWith('$deadline:'))
    .map((s) => (s.startsWith('$signal:') ? `(wait ${s.slice(8)})` : s))
    .join(' → ');

function print(out: (l: string) => void, r: RollingDeployReport): void {
  const rows = [
    ['version', 'runs', 'succeeded', 'path', 'crossed the deploy', 'handed on', 'steps recorded'],
  ];
  for (const v of [1, 2]) {
    const of = r.runs.filter((x) => x.version === v);
    if (!of.length) continue;
    rows.push([
      String(v),
      String(of.length),
      String(of.filter((x) => x.status === 'succeeded').length),
      [...new Set(of.map((x) => x.path))].join(','),
      String(of.filter(crossed).length),
      String(of.filter((x) => x.handedOn).length),
      [...new Set(of.map(stepsOf))].join(' | '),
    ]);
  }
  const widths = rows[0].map((_, i) => Math.max(...rows.map((row) => row[i].length)));
  out('');
  for (const row of rows)
    out(
      row
        .map((c, i) => c.padEnd(widths[i]))
        .join('  ')
        .trimEnd(),
    );
  out('');
  out(
    `non-determinism: ${r.nonDeterminism}   runs left on v1: ${r.v1Left}` +
      (r.v1Left ? '' : ' (the v1 class can be deleted)'),
  );
  out(r.ok ? 'every run finished on its own version’s path' : 'FAILED: a run did not finish on its path');
}

function flag(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

if (require.main === module) {
  runRollingDeploy({ orders: Number(flag('orders') ?? 40), pods: Number(flag('pods') ?? 2) }).then(
    (r) => process.exit(r.ok ? 0 : 1),
    (err: Error) => {
      process.stderr.write(`${err.stack ?? err.message}\n`);
      process.exit(1);
    },
  );
}
