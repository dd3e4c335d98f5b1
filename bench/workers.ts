import 'reflect-metadata';
import { ChildProcess, fork } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import { WAKE_CHANNEL } from '../src/durable-execution.constants';
import { alternateBlocks, Checkpointer } from './blocks';
import { BenchDatabase, dropDatabase } from './database';
import { adminUrl, log, parseBenchArgs, rotate, runMeta } from './cli';
import { compileBench } from './compile';
import { BlockPeer, ensurePeersInstalled, startBlocks, stopBlocks, workloadOf } from './peer-runs';
import { latency, pairRatios, sleep, spread, Spread } from './stats';
import {
  bootEngine,
  Engine,
  EngineConfig,
  HOLD_KIND,
  JOB_KIND,
  PARK_KIND,
  PICKUP_KIND,
  PICKUP_TABLE,
  RAW_PICKUP_CHANNEL,
  pickupProbe,
  ProcessMemory,
  ProcessStats,
  RAW_KIND,
  TPUT3_KIND,
  TPUT_KIND,
  WorkerCommand,
  WorkerMessage,
} from './worker-process';

/**
 * `npm run bench:workers [-- --quick] [-- --repeat N] [-- --out FILE]`
 * Workers as separate OS processes, on one throw-away database:
 * 1. pickup latency of an idle worker (poll every 5 s, so a fast pickup can only come from
 *    LISTEN/NOTIFY): `RunRepository.start` call begins → the step body begins, in-process and with the
 *    worker in another OS process (database clock on both ends there);
 * 2. throughput of 1-step runs with 1, 2 and 4 worker processes (16 in flight each), next to the raw
 *    node-postgres limit of the engine's own claim + finish statements with as many processes; and of
 *    3-step runs with as many processes;
 * 3. resident memory of one worker process: idle, with 1,000 runs parked on `ctx.waitForSignal`, and
 *    with 1,000 runs queued while 100 are in flight (`concurrency: 100`, each holding its step open).
 * See bench/README.md ("Workers as OS processes").
 */

interface WorkersConfig {
  /** Repeats of the context workloads: throughput at every process count, raw loops, memory. */
  repeat: number;
  /**
   * Pairs of pickup blocks (in-process, worker process, alternating, each block booting its engine), or
   * with `pickupInProcess` false blocks of the worker process only (its engine booted once); timed
   * pickups per block.
   */
  pickupBlocks: number;
  pickupInProcess: boolean;
  pickups: number;
  /** Untimed pickups before each block. */
  pickupWarmup: number;
  /** Idle time after a pickup run settled, before the next start (the worker's own re-claim is done). */
  pickupGapMs: number;
  /** Worker poll interval: long, so that only NOTIFY explains a fast pickup. */
  pollIntervalMs: number;
  /** Worker processes of the throughput figures. */
  processCounts: number[];
  /** Runs in flight per worker process (engine) = connections per raw process. */
  concurrency: number;
  /** Engine pool size per process (concurrency + 1 for the claim). */
  poolSize: number;
  /** Runs inserted at once per throughput workload and repeat. */
  runs: number;
  /** Untimed runs per process before each throughput workload. */
  warmRunsPerProcess: number;
  /**
   * The engine (one worker process) against graphile-worker: rounds of alternating blocks, runs (jobs)
   * per block, and graphile-worker's untimed warm-up jobs.
   */
  rounds: number;
  blockRuns: number;
  graphileWarmup: number;
  /** Memory figure: runs parked on a signal, runs queued, and runs in flight (= worker concurrency). */
  memParked: number;
  memQueued: number;
  memInFlight: number;
}

const FULL: WorkersConfig = {
  repeat: 3,
  pickupBlocks: 6,
  pickupInProcess: true,
  pickups: 50,
  pickupWarmup: 10,
  pickupGapMs: 20,
  pollIntervalMs: 5000,
  processCounts: [1, 2, 4],
  concurrency: 16,
  poolSize: 17,
  runs: 2500,
  warmRunsPerProcess: 48,
  rounds: 12,
  blockRuns: 1500,
  graphileWarmup: 500,
  memParked: 1000,
  memQueued: 1000,
  memInFlight: 100,
};

/**
 * `--quick`: the headline figures (pickup from a worker process; the engine against graphile-worker in
 * alternating blocks) with their spread, the rest once and with one process only.
 */
const QUICK: WorkersConfig = {
  ...FULL,
  repeat: 1,
  pickupBlocks: 8,
  pickupInProcess: false,
  pickups: 30,
  processCounts: [1],
  runs: 600,
  warmRunsPerProcess: 32,
  rounds: 10,
  blockRuns: 600,
};
/** `--smoke` (CI): proves the part runs, measures nothing worth reading. */
const SMOKE: WorkersConfig = {
  ...QUICK,
  pickupBlocks: 1,
  pickupInProcess: true,
  pickups: 5,
  pickupWarmup: 2,
  processCounts: [1, 2],
  runs: 120,
  warmRunsPerProcess: 4,
  rounds: 2,
  blockRuns: 60,
  graphileWarmup: 20,
  memParked: 40,
  memQueued: 40,
  memInFlight: 16,
};

const USAGE = `usage: npm run bench:workers -- [--quick] [--repeat N] [--out FILE]
  --smoke      tiny workloads (CI checks that the part still runs)
  --quick      the headline figures in blocks, the rest once with one process (default: 3 repeats)
  --repeat N   repeat the context workloads N times (N >= 2)
  --out FILE   where to write the JSON results (default bench/workers-results.json)
  DATABASE_URL admin connection (default postgres://root@127.0.0.1:5432/postgres); the bench creates
               and drops its own database dx_bench_<random> on that server`;

const benchStart = performance.now();
const elapsed = () => ((performance.now() - benchStart) / 1000).toFixed(0);

// ---------------------------------------------------------------------------------------------------
// Figures and ratios

type Unit = 'ms' | 'runs/s' | 'µs' | 'count' | 'MiB' | 'KiB';

interface Figure {
  key: string;
  label: string;
  unit: Unit;
  section: string;
}

interface Ratio {
  key: string;
  label: string;
  num: string;
  den: string;
}

const PICKUP =
  '1. Pickup latency, idle worker (poll every 5 s): RunRepository.start begins -> step body begins (per block)';
const H2H =
  '2a. 1-step runs/s, one worker process against graphile-worker (16 in flight each), alternating blocks';
const TPUT =
  '2. Throughput of 1-step runs, all inserted at once, K processes x 16 in flight (wall clock, DB)';
const CPU = '3. Client CPU per run (all worker processes together)';
const MEM = '4. Memory of one worker process (after a full GC; RSS from the OS)';

function pickupFigures(): Figure[] {
  const rows: Array<[string, Unit, string]> = [
    ['pickup.inproc.js.p50', 'ms', 'in-process, JS clock, p50'],
    ['pickup.inproc.js.p99', 'ms', 'in-process, JS clock, p99'],
    ['pickup.inproc.db.p50', 'ms', 'in-process, database clock, p50'],
    ['pickup.inproc.db.p99', 'ms', 'in-process, database clock, p99'],
    ['pickup.proc.db.p50', 'ms', 'worker OS process, database clock, p50'],
    ['pickup.proc.db.p99', 'ms', 'worker OS process, database clock, p99'],
    ['pickup.proc.wall.p50', 'ms', '  same, wall clocks of both processes, p50'],
    ['pickup.proc.wall.p99', 'ms', '  same, wall clocks of both processes, p99'],
    ['pickup.raw.db.p50', 'ms', 'raw: insert + NOTIFY -> LISTEN, read, mark (worker process), p50'],
    ['pickup.raw.db.p99', 'ms', 'raw: insert + NOTIFY -> LISTEN, read, mark (worker process), p99'],
    ['pickup.inproc.toInsert.p50', 'ms', 'in-process: start -> insert begins, p50'],
    ['pickup.inproc.toClaim.p50', 'ms', 'in-process: insert -> claim begins, p50'],
    ['pickup.inproc.toBody.p50', 'ms', 'in-process: claim -> step body, p50'],
    ['pickup.proc.toInsert.p50', 'ms', 'worker process: start -> insert begins, p50'],
    ['pickup.proc.toClaim.p50', 'ms', 'worker process: insert -> claim begins, p50'],
    ['pickup.proc.toBody.p50', 'ms', 'worker process: claim -> step body, p50'],
    ['pickup.inproc.start.p50', 'ms', 'RunRepository.start call (in-process app), p50'],
    ['pickup.proc.start.p50', 'ms', 'RunRepository.start call (API-only app), p50'],
    ['pickup.raw.start.p50', 'ms', 'raw: the insert + NOTIFY statement (dedicated connection), p50'],
  ];
  return rows.map(([key, unit, label]) => ({ key, unit, label, section: PICKUP }));
}

function throughputFigures(counts: number[]): Figure[] {
  const out: Figure[] = [];
  for (const k of counts) {
    const p = `${k} process${k > 1 ? 'es' : ''}`;
    out.push(
      { key: `engine.k${k}`, unit: 'runs/s', label: `engine, ${p}`, section: TPUT },
      { key: `engine3.k${k}`, unit: 'runs/s', label: `engine, 3-step runs, ${p}`, section: TPUT },
      ...(k === counts[0]
        ? [
            {
              key: `engine0.k${k}`,
              unit: 'runs/s' as Unit,
              label: `engine, job-style runs (no step), ${p}`,
              section: TPUT,
            },
          ]
        : []),
      { key: `raw.cf.k${k}`, unit: 'runs/s', label: `raw claim(1) + FINISH_RUN_SQL, ${p}`, section: TPUT },
      {
        key: `raw.csf.k${k}`,
        unit: 'runs/s',
        label: `raw claim(1) + STEP_WRITE_SQL + FINISH, ${p}`,
        section: TPUT,
      },
      {
        key: `engine.k${k}.batch`,
        unit: 'count',
        label: `  engine runs per non-empty claim, ${p}`,
        section: TPUT,
      },
      {
        key: `engine.k${k}.stmts`,
        unit: 'count',
        label: `  engine statements per run (client), ${p}`,
        section: TPUT,
      },
    );
  }
  for (const k of counts) {
    const p = `${k} process${k > 1 ? 'es' : ''}`;
    out.push(
      { key: `engine.k${k}.cpu`, unit: 'µs', label: `engine, ${p}`, section: CPU },
      { key: `raw.cf.k${k}.cpu`, unit: 'µs', label: `raw claim + finish, ${p}`, section: CPU },
      { key: `raw.csf.k${k}.cpu`, unit: 'µs', label: `raw claim + step write + finish, ${p}`, section: CPU },
    );
  }
  return out;
}

function memoryFigures(cfg: WorkersConfig): Figure[] {
  const rows: Array<[string, Unit, string]> = [
    ['mem.idle.rss', 'MiB', 'RSS, worker booted and idle'],
    ['mem.parked.rss', 'MiB', `RSS, ${cfg.memParked} runs parked on waitForSignal`],
    ['mem.busy.rss', 'MiB', `RSS, + ${cfg.memQueued} queued and ${cfg.memInFlight} in flight`],
    ['mem.idle.heap', 'MiB', 'JS heap used, idle'],
    ['mem.parked.heap', 'MiB', 'JS heap used, runs parked'],
    ['mem.busy.heap', 'MiB', `JS heap used, ${cfg.memInFlight} in flight`],
    ['mem.perInFlight', 'KiB', 'JS heap per run in flight (busy - parked) / in flight'],
  ];
  return rows.map(([key, unit, label]) => ({ key, unit, label, section: MEM }));
}

function headToHeadFigures(): Figure[] {
  const rows: Array<[string, Unit, string]> = [
    ['h2h.engine', 'runs/s', 'engine, worker process: insert -> last run finished'],
    ['h2h.graphile', 'runs/s', 'graphile-worker: addJobs -> last job done'],
    ['h2h.engine.cpu', 'µs', 'engine worker process CPU per run'],
    ['h2h.graphile.cpu', 'µs', 'graphile-worker runner process CPU per job (addJobs included)'],
    ['h2h.engine.stmts', 'count', 'engine statements per run (client)'],
    ['h2h.graphile.stmts', 'count', 'graphile-worker statements per job (client)'],
  ];
  return rows.map(([key, unit, label]) => ({ key, unit, label, section: H2H }));
}

function ratioDefs(counts: number[]): Ratio[] {
  const out: Ratio[] = [
    {
      key: 'engineOverGraphile',
      label: 'engine worker process / graphile-worker, per pair of blocks',
      num: 'h2h.engine',
      den: 'h2h.graphile',
    },
    {
      key: 'engineCpuOverGraphile',
      label: '  CPU per run: engine worker process / graphile-worker runner, per pair of blocks',
      num: 'h2h.engine.cpu',
      den: 'h2h.graphile.cpu',
    },
  ];
  for (const k of counts) {
    out.push({
      key: `engineOverRaw.k${k}`,
      label: `engine / raw claim+finish, ${k} proc`,
      num: `engine.k${k}`,
      den: `raw.cf.k${k}`,
    });
  }
  for (const k of counts) {
    out.push({
      key: `engineOverRawStep.k${k}`,
      label: `  engine / raw claim+step write+finish, ${k} proc`,
      num: `engine.k${k}`,
      den: `raw.csf.k${k}`,
    });
  }
  for (const k of counts.slice(1)) {
    out.push(
      {
        key: `engineScaling.k${k}`,
        label: `  engine ${k} proc / engine ${counts[0]} proc`,
        num: `engine.k${k}`,
        den: `engine.k${counts[0]}`,
      },
      {
        key: `rawScaling.k${k}`,
        label: `  raw claim+finish ${k} proc / ${counts[0]} proc`,
        num: `raw.cf.k${k}`,
        den: `raw.cf.k${counts[0]}`,
      },
    );
  }
  out.push({
    key: 'pickupProcOverRaw',
    label: '  pickup p50: worker process / raw insert + NOTIFY -> read -> mark (DB clock)',
    num: 'pickup.proc.db.p50',
    den: 'pickup.raw.db.p50',
  });
  out.push({
    key: 'pickupProcOverInproc',
    label: '  pickup p50: worker process / in-process (DB clock)',
    num: 'pickup.proc.db.p50',
    den: 'pickup.inproc.db.p50',
  });
  return out;
}

/** One value per figure per repeat, plus free-form details per repeat. */
class Results {
  readonly values = new Map<string, number[]>();
  readonly details: Array<Record<string, unknown>> = [];

  constructor(readonly figures: Figure[]) {}

  put(key: string, repeat: number, value: number): void {
    if (!this.figures.some((f) => f.key === key)) throw new Error(`unknown figure ${key}`);
    const arr = this.values.get(key) ?? [];
    arr[repeat] = value;
    this.values.set(key, arr);
  }

  detail(repeat: number, name: string, value: unknown): void {
    this.details[repeat] = { ...this.details[repeat], [name]: value };
  }

  /** An invariant, checked once per workload and repeat: OK only if it held every time. */
  readonly checks = new Map<string, { ok: boolean; seen: string[] }>();

  check(label: string, ok: boolean, seen: string): void {
    const c = this.checks.get(label) ?? { ok: true, seen: [] };
    c.ok &&= ok;
    c.seen.push(seen);
    this.checks.set(label, c);
  }
}

const CHECK_POLL = 'no pickup waited for the 5 s poll (all < 1 s)';
const CHECK_SHARE = 'every engine worker process claimed runs';

// ---------------------------------------------------------------------------------------------------
// Worker processes

/** A command without its request id (distributes over the union). */
type Command = WorkerCommand extends infer C ? (C extends { id: number } ? Omit<C, 'id'> : never) : never;

/** A forked bench/worker-process.ts, driven by request/response messages over IPC. */
class WorkerHandle {
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  readonly ready: Promise<void>;
  readonly exited: Promise<void>;
  private gone = false;

  private constructor(
    readonly child: ChildProcess,
    onBegan: (runId: string) => void,
  ) {
    this.exited = new Promise((resolve) =>
      child.once('exit', (code, signal) => {
        this.gone = true;
        const err = new Error(`worker process ${child.pid} exited (${code ?? signal})`);
        for (const p of this.pending.values()) p.reject(err);
        this.pending.clear();
        resolve();
      }),
    );
    this.ready = new Promise<void>((resolve, reject) => {
      child.on('message', (m: WorkerMessage) => {
        if ('event' in m) {
          if (m.event === 'ready') resolve();
          else if (m.event === 'began') onBegan(m.runId);
          return;
        }
        const p = this.pending.get(m.id);
        if (!p) return;
        this.pending.delete(m.id);
        if (m.ok) p.resolve(m.value);
        else p.reject(new Error(`worker process ${child.pid}: ${m.error}`));
      });
      void this.exited.then(() => reject(new Error(`worker process ${child.pid} exited before ready`)));
    });
    this.ready.catch(() => undefined);
  }

  /** Forks the compiled worker (see `compileWorker`): plain node, as a deployed worker runs. */
  static spawn(script: string, onBegan: (runId: string) => void): WorkerHandle {
    const child = fork(script, [], {
      execArgv: ['--expose-gc'],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    return new WorkerHandle(child, onBegan);
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  request(cmd: Command): Promise<unknown> {
    if (this.gone) return Promise.reject(new Error(`worker process ${this.pid} is gone`));
    const id = this.nextId++;
    return new Promise<unknown>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.child.send({ ...cmd, id });
    });
  }

  /** Asks the process to exit; kills it (by its pid) if it has not after `ms`. */
  async stop(ms = 5000): Promise<void> {
    if (this.gone) return;
    this.request({ cmd: 'exit' }).catch(() => undefined);
    const timer = setTimeout(() => this.child.kill('SIGKILL'), ms);
    await this.exited;
    clearTimeout(timer);
  }
}

/**
 * Compiles bench/worker-process.ts (and the library sources it imports) to JavaScript under
 * .tmp/bench-workers (see compileBench: not under bench/, where `pg` would resolve to the peers' copy),
 * so the worker processes run on plain node: no TypeScript compiler in their memory, no ts-node start-up.
 */
function compileWorker(): string {
  return compileBench('bench-workers', [join(__dirname, 'worker-process.ts')])[0];
}

/** Resolves `wait(id)` when `fire(id)` was called, before or after. */
class Signals {
  private readonly fired = new Set<string>();
  private readonly waiters = new Map<string, () => void>();

  fire(id: string): void {
    const w = this.waiters.get(id);
    if (w) {
      this.waiters.delete(id);
      w();
    } else this.fired.add(id);
  }

  async wait(id: string, timeoutMs: number): Promise<void> {
    if (this.fired.delete(id)) return;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters.delete(id);
        reject(new Error(`step body of run ${id} did not begin within ${timeoutMs} ms`));
      }, timeoutMs);
      this.waiters.set(id, () => {
        clearTimeout(timer);
        resolve();
      });
    });
  }
}

// ---------------------------------------------------------------------------------------------------
// The bench

/** The raw pickups of a block: start -> mark (database clock), and the insert's duration (JS clock). */
interface RawPickupResult {
  db: number[];
  start: number[];
}

interface PickupSample {
  runId: string;
  /** Database clock right before the start call (ms since epoch, µs resolution). */
  t0Db: number;
  /** performance.now() right before the start call. */
  t0: number;
  /** Duration of the start call (JS clock). */
  startMs: number;
}

interface PickupResult {
  js: number[];
  db: number[];
  wall: number[];
  toInsert: number[];
  toClaim: number[];
  toBody: number[];
  start: number[];
  pids: number[];
}

const DB_NOW = `select (extract(epoch from clock_timestamp()) * 1000)::float8 as t`;

class WorkersBench {
  private readonly signals = new Signals();
  private readonly jsBegin = new Map<string, number>();
  workers: WorkerHandle[] = [];
  private api?: Engine;
  /** The raw pickup's starter: a dedicated connection of this process (no pool, no engine). */
  private rawStarter?: Client;

  constructor(
    private readonly cfg: WorkersConfig,
    private readonly db: BenchDatabase,
  ) {}

  private get ctl() {
    return this.db.ctl;
  }

  private engineConfig(workerEnabled: boolean): EngineConfig {
    return {
      url: this.db.url,
      workerEnabled,
      concurrency: this.cfg.concurrency,
      poolSize: this.cfg.poolSize,
      pollIntervalMs: this.cfg.pollIntervalMs,
    };
  }

  async setup(): Promise<void> {
    await this.ctl.query(
      `create table ${PICKUP_TABLE} (run_id uuid primary key, began_at timestamptz not null default clock_timestamp(),
                                     js_wall_ms float8 not null, pid int not null)`,
    );
    const n = Math.max(...this.cfg.processCounts);
    const t0 = performance.now();
    const script = compileWorker();
    this.workers = Array.from({ length: n }, () => WorkerHandle.spawn(script, (id) => this.signals.fire(id)));
    await Promise.all(this.workers.map((w) => w.ready));
    log(`${n} worker processes ready (${((performance.now() - t0) / 1000).toFixed(1)} s)`);
    // API-only app of the parent (worker off): RunRepository.start for the worker-process pickups.
    this.api = await bootEngine(this.engineConfig(false));
    this.rawStarter = new Client({ connectionString: this.db.url, application_name: 'dx-bench-raw-start' });
    await this.rawStarter.connect();
    pickupProbe.onBegin = (runId, perf) => {
      this.jsBegin.set(runId, perf);
      this.signals.fire(runId);
    };
  }

  async close(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.stop()));
    await this.api?.close();
    await this.rawStarter?.end();
  }

  private async reset(): Promise<void> {
    await this.ctl.query(`truncate ${PICKUP_TABLE}`);
    await this.db.reset();
  }

  private async dbNow(): Promise<number> {
    return (await this.ctl.query(DB_NOW)).rows[0].t;
  }

  /** Waits until exactly `n` engine LISTEN connections are open on the bench database. */
  private async listeners(n: number, timeoutMs = 15_000): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const { rows } = await this.ctl.query(
        `select count(*)::int as n from pg_stat_activity where datname = current_database() and query = $1`,
        [`listen ${WAKE_CHANNEL}`],
      );
      if (rows[0].n === n) return;
      if (performance.now() > deadline)
        throw new Error(`expected ${n} LISTEN connections, found ${rows[0].n}`);
      await sleep(10);
    }
  }

  private async waitStatus(runId: string, timeoutMs = 10_000): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const { rows } = await this.ctl.query(`select status from ai_runs where id = $1`, [runId]);
      if (rows[0]?.status === 'succeeded') return;
      if (rows[0] && !['pending', 'running', 'waiting'].includes(rows[0].status)) {
        throw new Error(`pickup run ${runId} ended ${rows[0].status}`);
      }
      if (performance.now() > deadline) throw new Error(`pickup run ${runId} still ${rows[0]?.status}`);
      await sleep(2);
    }
  }

  /** Sequential pickups: each start waits for the previous run to settle and the worker to be idle. */
  private async pickups(engine: Engine, n: number): Promise<PickupSample[]> {
    const out: PickupSample[] = [];
    for (let i = 0; i < n; i++) {
      const t0Db = await this.dbNow();
      const t0 = performance.now();
      const { run } = await engine.runs.start(PICKUP_KIND, { i });
      const startMs = performance.now() - t0;
      await this.signals.wait(run.id, 10_000);
      await sleep(this.cfg.pickupGapMs);
      await this.waitStatus(run.id);
      out.push({ runId: run.id, t0Db, t0, startMs });
    }
    return out;
  }

  /**
   * The raw pickup, one at a time as `pickups`: a run row inserted with its NOTIFY in one statement
   * (one commit, as a start must be durable before anyone runs it) on a dedicated connection; worker
   * process 0 hears it, reads the run and writes the mark (RawPickup in worker-process.ts). The
   * database clock from before the insert to the mark, and the insert's own duration (JS clock), per
   * run (ms).
   */
  private async rawPickups(n: number): Promise<RawPickupResult> {
    const ids: Array<{ runId: string; t0Db: number; startMs: number }> = [];
    for (let i = 0; i < n; i++) {
      const t0Db = await this.dbNow();
      const t0 = performance.now();
      const { rows } = await this.rawStarter!.query({
        name: 'bench_raw_start',
        text: `with ins as (insert into ai_runs (kind, input) values ($1, $2::jsonb) returning id)
               select id, pg_notify($3, id::text) from ins`,
        values: [RAW_KIND, JSON.stringify({ i }), RAW_PICKUP_CHANNEL],
      });
      const startMs = performance.now() - t0;
      const runId = rows[0].id as string;
      await this.signals.wait(runId, 10_000);
      await sleep(this.cfg.pickupGapMs);
      // The engine's pickups read the run's status here once (waitStatus): the same round trip.
      await this.ctl.query(`select status from ai_runs where id = $1`, [runId]);
      ids.push({ runId, t0Db, startMs });
    }
    const { rows } = await this.ctl.query(
      `select run_id, (extract(epoch from began_at) * 1000)::float8 as began from ${PICKUP_TABLE}
        where run_id = any($1::uuid[])`,
      [ids.map((s) => s.runId)],
    );
    const began = new Map(rows.map((r) => [r.run_id as string, r.began as number]));
    // Untimed: no pending run of another kind stays behind the engine's own claims.
    await this.ctl.query(`delete from ai_runs where kind = $1`, [RAW_KIND]);
    const db = ids.map((s) => {
      const b = began.get(s.runId);
      if (b === undefined) throw new Error(`no raw pickup mark for run ${s.runId}`);
      return b - s.t0Db;
    });
    return { db, start: ids.map((s) => s.startMs) };
  }

  /** Joins the samples with the database stamps: insert (created_at), claim event, step body mark. */
  private async pickupResult(samples: PickupSample[]): Promise<PickupResult> {
    const { rows } = await this.ctl.query(
      `select p.run_id, p.pid, p.js_wall_ms,
              (extract(epoch from p.began_at) * 1000)::float8 as began,
              (extract(epoch from r.created_at) * 1000)::float8 as created,
              (select (extract(epoch from min(e.created_at)) * 1000)::float8 from ai_events e
                where e.run_id = p.run_id and e.event_type = 'run.claimed') as claimed
         from ${PICKUP_TABLE} p join ai_runs r on r.id = p.run_id
        where p.run_id = any($1::uuid[])`,
      [samples.map((s) => s.runId)],
    );
    const byId = new Map(rows.map((r) => [r.run_id as string, r]));
    const res: PickupResult = {
      js: [],
      db: [],
      wall: [],
      toInsert: [],
      toClaim: [],
      toBody: [],
      start: [],
      pids: [],
    };
    for (const s of samples) {
      const r = byId.get(s.runId);
      if (!r) throw new Error(`no pickup mark for run ${s.runId}`);
      const jsBegin = this.jsBegin.get(s.runId);
      if (jsBegin !== undefined) res.js.push(jsBegin - s.t0);
      res.db.push(r.began - s.t0Db);
      res.wall.push(r.js_wall_ms - (performance.timeOrigin + s.t0));
      res.toInsert.push(r.created - s.t0Db);
      res.toClaim.push(r.claimed - r.created);
      res.toBody.push(r.began - r.claimed);
      res.start.push(s.startMs);
      if (!res.pids.includes(r.pid)) res.pids.push(r.pid);
    }
    return res;
  }

  /** (1) Pickup with the worker in this process (one app: start and worker). */
  async pickupInProcess(): Promise<PickupResult> {
    await this.reset();
    const engine = await bootEngine(this.engineConfig(true));
    try {
      await this.listeners(1);
      await this.pickups(engine, this.cfg.pickupWarmup);
      const res = await this.pickupResult(await this.pickups(engine, this.cfg.pickups));
      if (res.pids.length !== 1 || res.pids[0] !== process.pid)
        throw new Error('in-process pickup ran elsewhere');
      if (res.js.length !== res.db.length) throw new Error('in-process pickup: JS stamps missing');
      return res;
    } finally {
      await engine.close();
      await this.listeners(0);
    }
  }

  /**
   * (1) Pickup with the worker in worker process 0; starts from this process's API-only app. Each block
   * of engine pickups has a block of raw pickups (`rawPickups`) beside it in the same process, the two
   * in an order that alternates by block.
   */
  async pickupWorkerProcess(blocks = 1): Promise<Array<{ engine: PickupResult; raw: RawPickupResult }>> {
    await this.reset();
    const w = this.workers[0];
    await w.request({ cmd: 'engine-start', config: this.engineConfig(true) });
    await w.request({ cmd: 'raw-pickup-open', url: this.db.url });
    try {
      await this.listeners(1);
      await this.pickups(this.api!, this.cfg.pickupWarmup);
      await this.rawPickups(this.cfg.pickupWarmup);
      const out: Array<{ engine: PickupResult; raw: RawPickupResult }> = [];
      for (let b = 0; b < blocks; b++) {
        let engine: PickupResult | undefined;
        let raw: RawPickupResult | undefined;
        for (const side of rotate(['engine', 'raw'] as const, b)) {
          if (side === 'raw') raw = await this.rawPickups(this.cfg.pickups);
          else engine = await this.pickupResult(await this.pickups(this.api!, this.cfg.pickups));
        }
        if (engine!.pids.length !== 1 || engine!.pids[0] !== w.pid)
          throw new Error('worker-process pickup ran elsewhere');
        out.push({ engine: engine!, raw: raw! });
      }
      return out;
    } finally {
      await w.request({ cmd: 'raw-pickup-close' });
      await w.request({ cmd: 'engine-stop' });
      await this.listeners(0);
    }
  }

  /** CPU time and statements of these processes, added up. */
  private async stats(ws: WorkerHandle[]): Promise<ProcessStats> {
    const all = (await Promise.all(ws.map((w) => w.request({ cmd: 'stats' })))) as ProcessStats[];
    const sum: ProcessStats = { cpuUs: 0, statements: {} };
    for (const s of all) {
      sum.cpuUs += s.cpuUs;
      for (const [k, v] of Object.entries(s.statements)) sum.statements[k] = (sum.statements[k] ?? 0) + v;
    }
    return sum;
  }

  /** `b - a`, per run. */
  private static perRun(a: ProcessStats, b: ProcessStats, runs: number) {
    const statements: Record<string, number> = {};
    for (const [k, v] of Object.entries(b.statements)) {
      const d = v - (a.statements[k] ?? 0);
      if (d) statements[k] = d / runs;
    }
    return {
      cpuUs: (b.cpuUs - a.cpuUs) / runs,
      statements: Object.values(statements).reduce((x, y) => x + y, 0),
      byName: statements,
    };
  }

  /**
   * Inserts `n` pending runs of `kind` in one statement. With `notify`, then wakes the workers with one
   * NOTIFY (as START_RUN_SQL would) and returns the database clock right before it: the start of the
   * window. Idle workers poll only every 5 s, so they do not see the runs before the NOTIFY.
   */
  private async insertRuns(kind: string, n: number, notify: boolean): Promise<number | null> {
    await this.ctl.query(
      `insert into ai_runs (kind, input) select $1, '{}'::jsonb from generate_series(1, $2)`,
      [kind, n],
    );
    if (!notify) return null;
    return (await this.ctl.query(`${DB_NOW}, pg_notify($1, $2)`, [WAKE_CHANNEL, kind])).rows[0].t;
  }

  /** Waits until `total` runs of `kind` succeeded (polled); the time the last one finished (DB clock). */
  private async allSucceeded(kind: string, total: number, timeoutMs = 120_000): Promise<number> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const { rows } = await this.ctl.query(
        `select count(*) filter (where status = 'succeeded')::int as ok,
                count(*) filter (where status not in ('pending', 'running', 'waiting', 'succeeded'))::int as bad,
                (extract(epoch from max(finished_at)) * 1000)::float8 as last
           from ai_runs where kind = $1`,
        [kind],
      );
      const r = rows[0];
      if (r.bad) throw new Error(`${r.bad} runs of ${kind} ended badly`);
      if (r.ok === total) return r.last;
      if (performance.now() > deadline)
        throw new Error(`${r.ok} of ${total} runs of ${kind} succeeded in time`);
      await sleep(100);
    }
  }

  /** Claim statements and runs per claiming process since `fromMs` (from the run.claimed events). */
  private async claimsSince(
    fromMs: number,
  ): Promise<Array<{ process: string; runs: number; claims: number }>> {
    const { rows } = await this.ctl.query(
      `select split_part(payload->>'workerId', ':', 2) as process, count(*)::int as runs,
              count(distinct (payload->>'workerId', created_at))::int as claims
         from ai_events where event_type = 'run.claimed' and created_at >= to_timestamp($1::float8 / 1000)
        group by 1 order by 1`,
      [fromMs],
    );
    return rows;
  }

  /** (2) Engine: `k` worker processes on their real schedule, `runs` runs of `kind` inserted at once. */
  async engineThroughput(k: number, kind: string) {
    await this.reset();
    const ws = this.workers.slice(0, k);
    await Promise.all(ws.map((w) => w.request({ cmd: 'engine-start', config: this.engineConfig(true) })));
    try {
      await this.listeners(k);
      const warm = this.cfg.warmRunsPerProcess * k;
      await this.insertRuns(kind, warm, true);
      await this.allSucceeded(kind, warm);
      await this.ctl.query('analyze ai_runs');
      const s0 = await this.stats(ws);
      const profiled = await this.profileStart(ws);
      const t0 = (await this.insertRuns(kind, this.cfg.runs, true))!;
      const last = await this.allSucceeded(kind, warm + this.cfg.runs);
      await profiled(`${kind}-k${k}`);
      const per = WorkersBench.perRun(s0, await this.stats(ws), this.cfg.runs);
      const seconds = (last - t0) / 1000;
      const claims = await this.claimsSince(t0);
      const claimStatements = claims.reduce((a, c) => a + c.claims, 0);
      return {
        perSec: this.cfg.runs / seconds,
        seconds,
        cpuUsPerRun: per.cpuUs,
        statementsPerRun: per.statements,
        statementsPerRunByName: per.byName,
        runsPerClaim: this.cfg.runs / claimStatements,
        perProcess: claims,
      };
    } finally {
      await Promise.all(ws.map((w) => w.request({ cmd: 'engine-stop' })));
      await this.listeners(0);
    }
  }

  /**
   * (2a) The engine in worker process 0 against graphile-worker (its runner in block mode on a database
   * of its own, bench/peers/graphile-worker.mjs), both up, warmed up and idle before the first block; then
   * `rounds` rounds of one block each, in rotating order, a CHECKPOINT before every block. An engine block
   * inserts `blockRuns` 1-step runs and wakes the worker in one statement; its window runs from the
   * database clock right before that statement to the `finished_at` of the last run, as graphile-worker's
   * runs from its addJobs() call (one statement, whose commit wakes its runner) to its last job. The
   * runs stay in the table from block to block (history, as in production).
   */
  async headToHead(graphile: BlockPeer, checkpoint: Checkpointer) {
    await this.reset();
    const w = this.workers[0];
    const { rounds, blockRuns } = this.cfg;
    await w.request({ cmd: 'engine-start', config: this.engineConfig(true) });
    const engine: Array<{ perSec: number; cpuUsPerRun: number; statementsPerRun: number }> = [];
    const peer: Array<Record<string, any>> = [];
    try {
      await this.listeners(1);
      let total = this.cfg.warmRunsPerProcess * 4;
      await this.insertRuns(TPUT_KIND, total, true);
      await this.allSucceeded(TPUT_KIND, total);
      await this.ctl.query('analyze ai_runs');
      const block = async (side: 'engine' | 'graphile') => {
        await checkpoint.run();
        if (side === 'graphile') return { peer: await graphile.runner.block(blockRuns) };
        const s0 = await this.stats([w]);
        const t0 = await this.dbNow();
        await this.insertRuns(TPUT_KIND, blockRuns, true);
        total += blockRuns;
        const last = await this.allSucceeded(TPUT_KIND, total);
        const per = WorkersBench.perRun(s0, await this.stats([w]), blockRuns);
        return {
          engine: {
            perSec: blockRuns / ((last - t0) / 1000),
            cpuUsPerRun: per.cpuUs,
            statementsPerRun: per.statements,
          },
        };
      };
      await alternateBlocks(
        rounds,
        ['engine', 'graphile'],
        async (side, r) => {
          const got = await block(side);
          if (got.peer) peer[r] = got.peer;
          if (got.engine) engine[r] = got.engine;
        },
        // One untimed round first, as in the peers part.
        async (side) => void (await block(side)),
      );
    } finally {
      await w.request({ cmd: 'engine-stop' });
      await this.listeners(0);
    }
    return { engine, peer };
  }

  /**
   * With BENCH_CPU_PROF=DIR, starts the V8 profiler in `ws`; the returned function stops it and writes
   * DIR/<label>-<pid>-<time>.cpuprofile (summarise with bench/cpu-profile.ts). A no-op otherwise.
   */
  private async profileStart(ws: WorkerHandle[]): Promise<(label: string) => Promise<void>> {
    const dir = process.env.BENCH_CPU_PROF;
    if (!dir) return async () => undefined;
    await Promise.all(ws.map((w) => w.request({ cmd: 'profile-start' })));
    return async (label) => {
      await Promise.all(
        ws.map((w) =>
          w.request({ cmd: 'profile-stop', file: join(dir, `${label}-${w.pid}-${Date.now()}.cpuprofile`) }),
        ),
      );
    };
  }

  /** Waits until `n` runs of `kind` have `status`; polled. */
  private async statusCount(kind: string, status: string, n: number, timeoutMs = 60_000): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const { rows } = await this.ctl.query(
        `select count(*)::int as n from ai_runs where kind = $1 and status = $2`,
        [kind, status],
      );
      if (rows[0].n === n) return;
      if (performance.now() > deadline) throw new Error(`${rows[0].n} of ${n} runs of ${kind} are ${status}`);
      await sleep(50);
    }
  }

  /**
   * (3) Memory of worker process 0 with `concurrency: memInFlight`: idle; with `memParked` runs parked
   * on a signal (claimed, one step, parked, released); then with `memQueued + memInFlight` runs whose
   * step holds its slot, so `memInFlight` are in flight and the rest wait in the queue. Every input
   * carries 1 KiB of text, as an agent's prompt context would.
   */
  async memory() {
    await this.reset();
    const w = this.workers[0];
    const mem = async () => (await w.request({ cmd: 'memory' })) as ProcessMemory;
    const { memParked, memQueued, memInFlight } = this.cfg;
    const insert = (kind: string, n: number) =>
      this.ctl.query(
        `with r as (insert into ai_runs (kind, input)
                    select $1, jsonb_build_object('note', repeat('x', 1024) || i) from generate_series(1, $2) i)
         select pg_notify($3, $1)`,
        [kind, n, WAKE_CHANNEL],
      );
    await w.request({
      cmd: 'engine-start',
      config: { ...this.engineConfig(true), concurrency: memInFlight, poolSize: this.cfg.poolSize },
    });
    try {
      await this.listeners(1);
      const idle = await mem();
      await insert(PARK_KIND, memParked);
      await this.statusCount(PARK_KIND, 'waiting', memParked);
      await sleep(200);
      const parked = await mem();
      await w.request({ cmd: 'close-holds' });
      await insert(HOLD_KIND, memQueued + memInFlight);
      await this.statusCount(HOLD_KIND, 'running', memInFlight);
      await sleep(200);
      const busy = await mem();
      await w.request({ cmd: 'open-holds' });
      await this.allSucceeded(HOLD_KIND, memQueued + memInFlight);
      return { idle, parked, busy };
    } finally {
      await w.request({ cmd: 'open-holds' }).catch(() => undefined);
      await w.request({ cmd: 'engine-stop' });
      await this.listeners(0);
    }
  }

  /** (2) Raw limit: `k` processes x `concurrency` connections, claim(1) [+ step write] + finish. */
  async rawThroughput(k: number, withStep: boolean) {
    await this.reset();
    const ws = this.workers.slice(0, k);
    const go = async () => {
      const done = (await Promise.all(ws.map((w) => w.request({ cmd: 'raw-go' })))) as number[];
      return done.reduce((a, b) => a + b, 0);
    };
    await Promise.all(
      ws.map((w) =>
        w.request({ cmd: 'raw-open', url: this.db.url, connections: this.cfg.concurrency, withStep }),
      ),
    );
    try {
      const warm = this.cfg.warmRunsPerProcess * k;
      await this.insertRuns(RAW_KIND, warm, false);
      if ((await go()) !== warm) throw new Error('raw warm-up lost runs');
      await this.ctl.query('analyze ai_runs');
      await this.insertRuns(RAW_KIND, this.cfg.runs, false);
      const s0 = await this.stats(ws);
      const profiled = await this.profileStart(ws);
      const t0 = await this.dbNow();
      const done = await go();
      await profiled(`raw-${withStep ? 'csf' : 'cf'}-k${k}`);
      const per = WorkersBench.perRun(s0, await this.stats(ws), this.cfg.runs);
      if (done !== this.cfg.runs) throw new Error(`raw loop completed ${done} of ${this.cfg.runs} runs`);
      const last = await this.allSucceeded(RAW_KIND, warm + this.cfg.runs, 5_000);
      const seconds = (last - t0) / 1000;
      return {
        perSec: this.cfg.runs / seconds,
        seconds,
        cpuUsPerRun: per.cpuUs,
        statementsPerRun: per.statements,
        statementsPerRunByName: per.byName,
      };
    } finally {
      await Promise.all(ws.map((w) => w.request({ cmd: 'raw-close' })));
    }
  }
}

/**
 * (1) Pickup: `pickupBlocks` pairs of blocks, in-process and from a worker process alternating (each
 * block boots its engine, as only one may listen), or (`pickupInProcess` false) blocks from the worker
 * process only; every figure per block.
 */
async function pickupPhase(cfg: WorkersConfig, bench: WorkersBench, res: Results): Promise<void> {
  const record = (b: number, mode: string, p: PickupResult) => {
    const put = (key: string, v: number) => res.put(key, b, v);
    const db = latency(p.db);
    put(`pickup.${mode}.db.p50`, db.p50);
    put(`pickup.${mode}.db.p99`, db.p99);
    if (mode === 'inproc') {
      const js = latency(p.js);
      put('pickup.inproc.js.p50', js.p50);
      put('pickup.inproc.js.p99', js.p99);
    } else {
      const wall = latency(p.wall);
      put('pickup.proc.wall.p50', wall.p50);
      put('pickup.proc.wall.p99', wall.p99);
    }
    put(`pickup.${mode}.toInsert.p50`, latency(p.toInsert).p50);
    put(`pickup.${mode}.toClaim.p50`, latency(p.toClaim).p50);
    put(`pickup.${mode}.toBody.p50`, latency(p.toBody).p50);
    put(`pickup.${mode}.start.p50`, latency(p.start).p50);
    const dbMax = Math.max(...p.db);
    res.check(CHECK_POLL, dbMax < 1000, `${mode} max ${dbMax.toFixed(1)} ms`);
    const slowest = p.db
      .map((ms, j) => ({ ms, toInsert: p.toInsert[j], toClaim: p.toClaim[j], toBody: p.toBody[j] }))
      .sort((x, y) => y.ms - x.ms)
      .slice(0, 3);
    res.detail(b, `pickup.${mode}`, { n: p.db.length, workerPids: p.pids, slowest });
  };
  const recordRaw = (b: number, raw: RawPickupResult) => {
    const l = latency(raw.db);
    res.put('pickup.raw.db.p50', b, l.p50);
    res.put('pickup.raw.db.p99', b, l.p99);
    res.put('pickup.raw.start.p50', b, latency(raw.start).p50);
  };
  let current = 0;
  if (!cfg.pickupInProcess) {
    log(
      `  +${elapsed()} s pickup, worker in its own OS process: ${cfg.pickupBlocks} blocks ` +
        `(load ${loadavg()[0].toFixed(1)})`,
    );
    (await bench.pickupWorkerProcess(cfg.pickupBlocks)).forEach((p, b) => {
      record(b, 'proc', p.engine);
      recordRaw(b, p.raw);
    });
    return;
  }
  const pickupModes: Array<[string, () => Promise<PickupResult>]> = [
    ['inproc', () => bench.pickupInProcess()],
    [
      'proc',
      async () => {
        const [p] = await bench.pickupWorkerProcess();
        recordRaw(current, p.raw);
        return p.engine;
      },
    ],
  ];
  for (let b = 0; b < cfg.pickupBlocks; b++) {
    current = b;
    for (const [mode, fn] of rotate(pickupModes, b)) {
      log(
        `  [${b + 1}/${cfg.pickupBlocks}] +${elapsed()} s pickup, ` +
          `${mode === 'inproc' ? 'worker in this process' : 'worker in its own OS process'} (load ${loadavg()[0].toFixed(1)})`,
      );
      record(b, mode, await fn());
    }
  }
}

/** (2a) The engine against graphile-worker, alternating blocks: one value per round. */
async function headToHeadPhase(
  cfg: WorkersConfig,
  bench: WorkersBench,
  res: Results,
  graphile: BlockPeer,
  checkpoint: Checkpointer,
): Promise<void> {
  log(
    `  +${elapsed()} s engine (worker process) against graphile-worker: ${cfg.rounds} rounds of ` +
      `${cfg.blockRuns} runs (load ${loadavg()[0].toFixed(1)})`,
  );
  const h = await bench.headToHead(graphile, checkpoint);
  log(`  +${elapsed()} s head-to-head done (${checkpoint})`);
  for (let r = 0; r < cfg.rounds; r++) {
    res.put('h2h.engine', r, h.engine[r].perSec);
    res.put('h2h.engine.cpu', r, h.engine[r].cpuUsPerRun);
    res.put('h2h.engine.stmts', r, h.engine[r].statementsPerRun);
    res.put('h2h.graphile', r, h.peer[r].perSecond);
    res.put('h2h.graphile.stmts', r, h.peer[r].statementsPerUnit);
    res.put('h2h.graphile.cpu', r, h.peer[r].cpuUsPerUnit);
  }
  res.detail(0, 'headToHead', h);
}

/** One repeat of the context workloads: throughput at every process count, raw loops, memory. */
async function repeatOnce(r: number, cfg: WorkersConfig, bench: WorkersBench, res: Results): Promise<void> {
  const put = (key: string, v: number) => res.put(key, r, v);
  const phase = (name: string) =>
    log(`  [${r + 1}/${cfg.repeat}] +${elapsed()} s ${name} (load ${loadavg()[0].toFixed(1)})`);

  for (const [i, k] of cfg.processCounts.entries()) {
    const workloads: Array<[string, () => Promise<void>]> = [
      [
        'engine',
        async () => {
          const e = await bench.engineThroughput(k, TPUT_KIND);
          put(`engine.k${k}`, e.perSec);
          put(`engine.k${k}.batch`, e.runsPerClaim);
          put(`engine.k${k}.stmts`, e.statementsPerRun);
          put(`engine.k${k}.cpu`, e.cpuUsPerRun);
          res.check(CHECK_SHARE, e.perProcess.length === k, `${e.perProcess.length}/${k}`);
          res.detail(r, `engine.k${k}`, e);
        },
      ],
      [
        'engine 3-step runs',
        async () => {
          const e = await bench.engineThroughput(k, TPUT3_KIND);
          put(`engine3.k${k}`, e.perSec);
          res.detail(r, `engine3.k${k}`, e);
        },
      ],
      ...(i === 0
        ? ([
            [
              'engine job-style runs',
              async () => {
                const e = await bench.engineThroughput(k, JOB_KIND);
                put(`engine0.k${k}`, e.perSec);
                res.detail(r, `engine0.k${k}`, e);
              },
            ],
          ] as Array<[string, () => Promise<void>]>)
        : []),
      [
        'raw claim+finish',
        async () => {
          const x = await bench.rawThroughput(k, false);
          put(`raw.cf.k${k}`, x.perSec);
          put(`raw.cf.k${k}.cpu`, x.cpuUsPerRun);
          res.detail(r, `raw.cf.k${k}`, x);
        },
      ],
      [
        'raw claim+step write+finish',
        async () => {
          const x = await bench.rawThroughput(k, true);
          put(`raw.csf.k${k}`, x.perSec);
          put(`raw.csf.k${k}.cpu`, x.cpuUsPerRun);
          res.detail(r, `raw.csf.k${k}`, x);
        },
      ],
    ];
    for (const [name, fn] of rotate(workloads, r + i)) {
      phase(`throughput, ${k} process${k > 1 ? 'es' : ''}: ${name}`);
      await fn();
    }
  }

  phase(`memory: one worker process, concurrency ${cfg.memInFlight}`);
  const m = await bench.memory();
  const mib = (b: number) => b / 1024 / 1024;
  put('mem.idle.rss', mib(m.idle.rss));
  put('mem.parked.rss', mib(m.parked.rss));
  put('mem.busy.rss', mib(m.busy.rss));
  put('mem.idle.heap', mib(m.idle.heapUsed));
  put('mem.parked.heap', mib(m.parked.heapUsed));
  put('mem.busy.heap', mib(m.busy.heapUsed));
  put('mem.perInFlight', (m.busy.heapUsed - m.parked.heapUsed) / 1024 / cfg.memInFlight);
  res.detail(r, 'memory', m);
}

function fmt(v: number, unit: string): string {
  if (!Number.isFinite(v)) return '-';
  if (unit === 'ms') return v.toFixed(2);
  if (unit === 'count' || unit === 'x') return v.toFixed(2);
  return v.toFixed(0);
}

interface Summary {
  meta: Record<string, unknown>;
  config: WorkersConfig;
  figures: Array<Figure & Spread>;
  ratios: Array<Ratio & Spread>;
  checks: Array<{ label: string; ok: boolean; seen: string[] }>;
  details: Array<Record<string, unknown>>;
}

function summarise(
  res: Results,
  ratios: Ratio[],
  config: WorkersConfig,
  meta: Record<string, unknown>,
): Summary {
  const figures = res.figures.map((f) => ({
    ...f,
    ...spread((res.values.get(f.key) ?? []).filter((v) => v !== undefined)),
  }));
  const rs = ratios.map((q) => ({
    ...q,
    ...pairRatios(
      (res.values.get(q.num) ?? []).map((v) => v ?? NaN),
      (res.values.get(q.den) ?? []).map((v) => v ?? NaN),
    ),
  }));
  const checks = [...res.checks].map(([label, c]) => ({ label, ...c }));
  return { meta, config, figures, ratios: rs, checks, details: res.details };
}

function printSummary(s: Summary): void {
  const m = s.meta;
  const w = 56;
  const pad = (x: string, n: number) => x.padEnd(n);
  const lpad = (x: string, n: number) => x.padStart(n);
  const row = (label: string, unit: string, v: Spread, f: string) =>
    `${pad(label, w)} ${pad(unit, 7)}${lpad(fmt(v.median, f), 9)}${lpad(fmt(v.q1, f), 9)}${lpad(fmt(v.q3, f), 9)}` +
    `${lpad(fmt(v.min, f), 9)}${lpad(fmt(v.max, f), 9)}${lpad(String(v.samples.length), 4)}`;
  console.log(
    `\nnestjs-durable-execution workers bench: ${m.mode}, ${m.repeats} repeats, ${m.cpus} CPUs, node ${m.node}\n` +
      `${String(m.postgres).split(' on ')[0]}; database ${m.database}; ${m.durationSeconds} s; ` +
      `1-min load average after the pickups, the head-to-head and each repeat: ${(m.loadAverageAfterEachRepeat as number[]).join(', ')}\n` +
      `Every figure: median, quartiles and min / max over its samples (n): one per block (pickup, section 2a) ` +
      `or per repeat (the rest).`,
  );
  let section = '';
  const head =
    `${pad('figure', w)} ${pad('unit', 7)}${lpad('median', 9)}${lpad('q1', 9)}${lpad('q3', 9)}` +
    `${lpad('min', 9)}${lpad('max', 9)}${lpad('n', 4)}`;
  for (const f of s.figures) {
    if (f.section !== section) {
      section = f.section;
      console.log(`\n${section}\n${head}`);
    }
    console.log(row(f.label, f.unit, f, f.unit));
  }
  console.log(
    `\n5. Ratios (per pair of blocks or per repeat, then median, quartiles, min / max)\n${head.replace('figure', 'ratio ')}`,
  );
  for (const q of s.ratios) console.log(row(q.label, 'x', q, 'x'));
  console.log('\nChecks');
  for (const c of s.checks)
    console.log(`${pad(c.label, w)} ${c.ok ? 'OK  ' : 'FAIL'}  (${c.seen.join('; ')})`);
}

async function main(): Promise<void> {
  const {
    config: cfg,
    out,
    mode,
  } = parseBenchArgs(
    process.argv.slice(2),
    USAGE,
    { full: FULL, quick: QUICK, smoke: SMOKE },
    join(__dirname, 'workers-results.json'),
  );
  const admin = adminUrl();
  const started = Date.now();
  log(`creating the bench database on ${new URL(admin).host} ...`);
  const db = await BenchDatabase.create(admin);
  log(`database ${db.name} (schema applied with runDurableMigrations)`);

  const bench = new WorkersBench(cfg, db);
  let interrupted = false;
  process.once('SIGINT', () => {
    interrupted = true;
    log(`interrupted: stopping the worker processes, dropping ${db.name}`);
    void Promise.all(bench.workers.map((w) => w.stop(1000)))
      .then(() => dropDatabase(admin, db.name))
      .finally(() => process.exit(130));
  });

  const figures = [
    ...pickupFigures(),
    ...headToHeadFigures(),
    ...throughputFigures(cfg.processCounts),
    ...memoryFigures(cfg),
  ];
  const res = new Results(figures);
  const loads: number[] = [];
  let graphile: BlockPeer | undefined;
  const checkpoint = await Checkpointer.open(admin);
  try {
    // graphile-worker (bench/package.json) boots and warms up on its own database while ours compile.
    ensurePeersInstalled();
    const booting = startBlocks(admin, '', workloadOf('graphile-worker', 'drain'), {
      concurrency: cfg.concurrency,
      warmup: cfg.graphileWarmup,
    });
    booting.catch(() => undefined);
    await bench.setup();
    graphile = await booting;
    await pickupPhase(cfg, bench, res);
    loads.push(loadavg()[0]);
    await headToHeadPhase(cfg, bench, res, graphile, checkpoint);
    loads.push(loadavg()[0]);
    for (let r = 0; r < cfg.repeat && !interrupted; r++) {
      await repeatOnce(r, cfg, bench, res);
      loads.push(loadavg()[0]);
    }
  } finally {
    if (graphile) await stopBlocks(graphile);
    await checkpoint.close();
    await bench.close().catch((e) => log(`closing the workers failed: ${(e as Error).message}`));
    await db.close().catch((e) => log(`could not drop ${db.name}: ${(e as Error).message}`));
  }

  const meta = {
    ...runMeta(started, mode),
    repeats: cfg.repeat,
    pickupBlocks: cfg.pickupBlocks,
    rounds: cfg.rounds,
    loadAverageAfterEachRepeat: loads.map((l) => Number(l.toFixed(2))),
    postgres: db.serverVersion,
    database: db.name,
    checkpointBeforeEachWorkload: db.canCheckpoint,
  };
  const summary = summarise(res, ratioDefs(cfg.processCounts), cfg, meta);
  printSummary(summary);
  writeFileSync(out, `${JSON.stringify(summary, null, 2)}\n`);
  log(`\nresults written to ${out} (${meta.durationSeconds} s)`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
