/**
 * The worker OS process of `npm run bench:workers` (bench/workers.ts forks four of them). Started with
 * ts-node, it signals 'ready' over IPC and then waits for commands from the parent:
 *
 * - `engine-start`: boots the real module (`DurableExecutionModule.forRoot`, worker enabled on its real
 *   schedule: poll timer, heartbeat timer, LISTEN/NOTIFY wake-up; reconciler off) with the bench
 *   workflows below; `engine-stop` closes it again (graceful drain). The process stays, so the next
 *   boot costs a Nest init and not a ts-node start.
 * - `raw-open` / `raw-go` / `raw-close`: the raw limit on node-postgres: `connections` dedicated
 *   connections, each looping the engine's own CLAIM_RUNS_SQL (limit 1), optionally STEP_WRITE_SQL,
 *   and FINISH_RUN_SQL until nothing is left to claim.
 * - `raw-pickup-open` / `raw-pickup-close`: the raw pickup, the pickup's physical limit on this machine:
 *   a LISTEN connection for RAW_PICKUP_CHANNEL and one more connection that, for each run id heard,
 *   reads the run's input and writes the same mark as the pickup step's body (RawPickup below).
 * - `stats`: this process's CPU time so far (user + system, µs) and the statements it sent so far, by
 *   name (engine: every `pool.query` of the module's pool; raw: the loop's statements).
 * - `exit`: closes everything and exits.
 *
 * The same file exports the bench workflows and `bootEngine`, which the parent uses for the in-process
 * pickup figures, so both sides run identical code.
 */
import 'reflect-metadata';
import { mkdirSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { dirname } from 'node:path';
import { INestApplicationContext, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Client, Pool, PoolClient } from 'pg';
import { DurableExecutionModule, DurableStep, DurableWorkflow, RunContext, RunRepository } from '../src';
import { DurableDatabase } from '../src/store/durable-database';
import { DEFAULT_NAMES } from '../src/store/durable-names';
import { CLAIM_RUNS_SQL as claimRunsSql } from '../src/store/run-state/claim-runs';
import { claimedRows, claimValues, rawFinish, RawStepWriter } from './raw';

/** The engine's claim statement as it sends it in the default schema. */
const CLAIM_RUNS_SQL = claimRunsSql(DEFAULT_NAMES);

/** 1-step workflow of the pickup figures: the step marks when its body began. */
export const PICKUP_KIND = 'bench.pickup';
/** 1-step workflow of the engine throughput figures: a trivial compute step. */
export const TPUT_KIND = 'bench.tput';
/** Job-style workflow (the work is in `run()`, no step): a job of a queue, done at least once. */
export const JOB_KIND = 'bench.job';
/** 3-step workflow of the engine throughput figures: three trivial compute steps. */
export const TPUT3_KIND = 'bench.tput3';
/** Memory figure: a run whose only step holds its slot until the parent sends `release-holds`. */
export const HOLD_KIND = 'bench.hold';
/** Memory figure: a run parked on `ctx.waitForSignal` (status `waiting`, nothing held in memory). */
export const PARK_KIND = 'bench.park';
/** Kind of the runs the raw loops claim (no engine registers it). */
export const RAW_KIND = 'bench.workers.raw';
/** Table the pickup step writes its start into (created by the parent). */
export const PICKUP_TABLE = 'bench_pickup';
/** Channel of the raw pickup: the payload is the id of the run just inserted (bench/workers.ts). */
export const RAW_PICKUP_CHANNEL = 'bench_raw_pickup';
/** Lease length the raw loop passes where the engine passes `worker.leaseTtlMs` (default 30 s). */
const LEASE_TTL_MS = 30_000;

/**
 * Where the pickup step reports. `client` is a dedicated connection (no pool checkout in front of the
 * mark); `onBegin` is set by the in-process parent; a forked worker tells the parent over IPC.
 */
export const pickupProbe = {
  client: null as Client | null,
  onBegin: null as ((runId: string, perfMs: number) => void) | null,
};

/** Statements sent by this process, by name (see `stats`). */
const statements: Record<string, number> = {};
const count = (name: string) => void (statements[name] = (statements[name] ?? 0) + 1);

/** What `stats` answers. */
export interface ProcessStats {
  cpuUs: number;
  statements: Record<string, number>;
}

export function processStats(): ProcessStats {
  const u = process.cpuUsage();
  return { cpuUs: u.user + u.system, statements: { ...statements } };
}

/** What `memory` answers: this process's memory after a full GC (bytes). */
export interface ProcessMemory {
  rss: number;
  heapUsed: number;
  external: number;
}

function memory(): ProcessMemory {
  (globalThis as { gc?: () => void }).gc?.();
  const m = process.memoryUsage();
  return { rss: m.rss, heapUsed: m.heapUsed, external: m.external };
}

@DurableWorkflow(PICKUP_KIND)
export class PickupWorkflow {
  async run(_input: unknown, ctx: RunContext): Promise<{ ok: boolean }> {
    return this.began(ctx.runId);
  }

  /**
   * The first thing the body does is read the clocks; then it stores the database clock
   * (`clock_timestamp()`, column default) and this process's wall clock in `bench_pickup`.
   */
  @DurableStep()
  async began(runId: string): Promise<{ ok: boolean }> {
    const perf = performance.now();
    pickupProbe.onBegin?.(runId, perf);
    await pickupProbe.client!.query({
      name: 'bench_pickup_mark',
      text: `insert into ${PICKUP_TABLE} (run_id, js_wall_ms, pid) values ($1, $2, $3)`,
      values: [runId, performance.timeOrigin + perf, process.pid],
    });
    if (!pickupProbe.onBegin) process.send?.({ event: 'began', runId });
    return { ok: true };
  }
}

@DurableWorkflow(TPUT_KIND)
export class TputWorkflow {
  async run(): Promise<{ ok: boolean }> {
    return this.step();
  }

  @DurableStep()
  async step(): Promise<{ ok: boolean }> {
    return { ok: true };
  }
}

@DurableWorkflow(JOB_KIND)
export class JobWorkflow {
  async run(): Promise<{ ok: boolean }> {
    return { ok: true };
  }
}

@DurableWorkflow(TPUT3_KIND)
export class Tput3Workflow {
  async run(): Promise<{ ok: boolean }> {
    await this.one();
    await this.two();
    return this.three();
  }

  @DurableStep()
  async one(): Promise<{ ok: boolean }> {
    return { ok: true };
  }

  @DurableStep()
  async two(): Promise<{ ok: boolean }> {
    return { ok: true };
  }

  @DurableStep()
  async three(): Promise<{ ok: boolean }> {
    return { ok: true };
  }
}

/** Steps of HOLD_KIND runs wait on this gate: `close-holds` arms it, `open-holds` lets them all go. */
const holds = { open: () => undefined as void, gate: Promise.resolve() };

@DurableWorkflow(HOLD_KIND)
export class HoldWorkflow {
  async run(input: { note: string }): Promise<{ ok: boolean }> {
    return this.hold(input.note);
  }

  /** An agent step in flight: it holds its input and waits (as on a model call) until released. */
  @DurableStep()
  async hold(note: string): Promise<{ ok: boolean }> {
    await holds.gate;
    return { ok: note.length > 0 };
  }
}

@DurableWorkflow(PARK_KIND)
export class ParkWorkflow {
  async run(_input: unknown, ctx: RunContext): Promise<{ ok: boolean }> {
    await this.prepare();
    await ctx.waitForSignal('approval');
    return { ok: true };
  }

  @DurableStep()
  async prepare(): Promise<{ ok: boolean }> {
    return { ok: true };
  }
}

@Module({})
class BenchWorkerModule {}

export interface EngineConfig {
  url: string;
  /** False for the parent's API-only app (RunRepository.start without claiming). */
  workerEnabled: boolean;
  concurrency: number;
  poolSize: number;
  pollIntervalMs: number;
}

/** A running engine: the Nest app plus the probe connection of the pickup step. */
export interface Engine {
  app: INestApplicationContext;
  runs: RunRepository;
  close(): Promise<void>;
}

/** Boots the real module with the bench workflows; migrations are applied by the parent already. */
export async function bootEngine(cfg: EngineConfig): Promise<Engine> {
  let probe: Client | null = null;
  if (cfg.workerEnabled) {
    probe = new Client({ connectionString: cfg.url, application_name: 'dx-bench-probe' });
    probe.on('error', () => undefined);
    await probe.connect();
    pickupProbe.client = probe;
  }
  const app = await NestFactory.createApplicationContext(
    {
      module: BenchWorkerModule,
      imports: [
        DurableExecutionModule.forRoot({
          database: { url: cfg.url, poolSize: cfg.poolSize, migrationsRun: false },
          worker: {
            enabled: cfg.workerEnabled,
            concurrency: cfg.concurrency,
            pollIntervalMs: cfg.pollIntervalMs,
          },
          reconciler: { enabled: false },
        }),
      ],
      providers: [PickupWorkflow, TputWorkflow, JobWorkflow, Tput3Workflow, HoldWorkflow, ParkWorkflow],
    },
    { logger: ['error', 'warn'] },
  );
  await app.init();
  if (cfg.workerEnabled) {
    // Count every statement the module sends on its pool (claims, step writes, finishes, heartbeats).
    const pool = app.get(DurableDatabase, { strict: false }).pool as unknown as {
      query: (...args: unknown[]) => unknown;
    };
    const query = pool.query;
    pool.query = function (this: unknown, ...args: unknown[]) {
      const q = args[0] as string | { name?: string };
      count((typeof q === 'object' && q.name) || 'unnamed');
      return query.apply(this, args);
    };
  }
  return {
    app,
    runs: app.get(RunRepository),
    close: async () => {
      await app.close();
      if (probe && pickupProbe.client === probe) pickupProbe.client = null;
      await probe?.end().catch(() => undefined);
    },
  };
}

/** `connections` dedicated connections of the raw loop. */
class RawLoop {
  private constructor(
    private readonly pool: Pool,
    private readonly clients: PoolClient[],
    private readonly withStep: boolean,
  ) {}

  static async open(url: string, connections: number, withStep: boolean): Promise<RawLoop> {
    const pool = new Pool({
      connectionString: url,
      max: connections,
      idleTimeoutMillis: 0,
      application_name: 'dx-bench-raw',
    });
    pool.on('error', () => undefined);
    const clients = await Promise.all(Array.from({ length: connections }, () => pool.connect()));
    return new RawLoop(pool, clients, withStep);
  }

  /** Every connection claims and completes runs until a claim comes back empty. Runs completed. */
  async go(): Promise<number> {
    const done = await Promise.all(this.clients.map((c, i) => this.drive(c, `raw:${process.pid}:${i}`)));
    return done.reduce((a, b) => a + b, 0);
  }

  private async drive(c: PoolClient, workerId: string): Promise<number> {
    let done = 0;
    for (;;) {
      count('bench_claim');
      const claim = await c.query({
        name: 'bench_claim',
        text: CLAIM_RUNS_SQL,
        // $5: runs this process drives (none); $6, $7: the (kind, version) pairs it registers; $8-$10:
        values: claimValues(workerId, [RAW_KIND], 1, LEASE_TTL_MS),
      });
      const claimed = claimedRows(claim.rows);
      if (!claimed.length) return done;
      const run = { id: claimed[0].id as string, epoch: Number(claimed[0].epoch) };
      if (this.withStep) {
        count('bench_step_write');
        await new RawStepWriter(c, run, workerId).write();
      }
      count('bench_finish');
      await rawFinish(c, run, workerId, { ok: true });
      done++;
    }
  }

  async close(): Promise<void> {
    this.clients.forEach((c) => c.release());
    await this.pool.end();
  }
}

/**
 * The worker side of the raw pickup: what any worker must do between a start's commit and a step body,
 * with nothing of the engine in between. A NOTIFY names the run, one read fetches its input (a NOTIFY
 * payload is too small to carry any input), the mark is the pickup step's own statement.
 */
class RawPickup {
  private constructor(
    private readonly listener: Client,
    private readonly reader: Client,
  ) {}

  static async open(url: string): Promise<RawPickup> {
    const connect = async (name: string) => {
      const c = new Client({ connectionString: url, application_name: name });
      c.on('error', () => undefined);
      await c.connect();
      return c;
    };
    const p = new RawPickup(await connect('dx-bench-raw-listen'), await connect('dx-bench-raw-read'));
    p.listener.on('notification', (n) => void p.picked(n.payload!));
    await p.listener.query(`listen ${RAW_PICKUP_CHANNEL}`);
    return p;
  }

  private async picked(runId: string): Promise<void> {
    const { rows } = await this.reader.query({
      name: 'bench_raw_read',
      text: 'select input from ai_runs where id = $1',
      values: [runId],
    });
    if (!rows.length) return;
    await this.reader.query({
      name: 'bench_pickup_mark',
      text: `insert into ${PICKUP_TABLE} (run_id, js_wall_ms, pid) values ($1, $2, $3)`,
      values: [runId, performance.timeOrigin + performance.now(), process.pid],
    });
    process.send?.({ event: 'began', runId });
  }

  async close(): Promise<void> {
    await Promise.all([this.listener.end(), this.reader.end()]);
  }
}

/** Parent → worker. */
export type WorkerCommand =
  | { id: number; cmd: 'engine-start'; config: EngineConfig }
  | { id: number; cmd: 'engine-stop' }
  | { id: number; cmd: 'raw-open'; url: string; connections: number; withStep: boolean }
  | { id: number; cmd: 'raw-go' }
  | { id: number; cmd: 'raw-close' }
  | { id: number; cmd: 'raw-pickup-open'; url: string }
  | { id: number; cmd: 'raw-pickup-close' }
  | { id: number; cmd: 'stats' }
  | { id: number; cmd: 'memory' }
  | { id: number; cmd: 'profile-start' }
  | { id: number; cmd: 'profile-stop'; file: string }
  | { id: number; cmd: 'close-holds' }
  | { id: number; cmd: 'open-holds' }
  | { id: number; cmd: 'exit' };

/** Worker → parent: the answer to command `id`, or an event ('ready', 'began'). */
export type WorkerMessage =
  | { id: number; ok: true; value?: unknown }
  | { id: number; ok: false; error: string }
  | { event: 'ready' }
  | { event: 'began'; runId: string };

/** One inspector protocol call. */
function post(session: Session, method: string): Promise<unknown> {
  return new Promise((resolve, reject) =>
    session.post(method, (err: Error | null, result?: unknown) => (err ? reject(err) : resolve(result))),
  );
}

async function main(): Promise<void> {
  let profiler: Session | null = null;
  let engine: Engine | null = null;
  let raw: RawLoop | null = null;
  let rawPickup: RawPickup | null = null;
  const reply = (m: WorkerMessage) => process.send?.(m);
  const handle = async (m: WorkerCommand): Promise<unknown> => {
    switch (m.cmd) {
      case 'engine-start':
        if (engine) throw new Error('engine already running');
        engine = await bootEngine(m.config);
        return;
      case 'engine-stop':
        await engine?.close();
        engine = null;
        return;
      case 'raw-open':
        if (raw) throw new Error('raw loop already open');
        raw = await RawLoop.open(m.url, m.connections, m.withStep);
        return;
      case 'raw-go':
        if (!raw) throw new Error('raw loop not open');
        return raw.go();
      case 'raw-close':
        await raw?.close();
        raw = null;
        return;
      case 'raw-pickup-open':
        if (rawPickup) throw new Error('raw pickup already open');
        rawPickup = await RawPickup.open(m.url);
        return;
      case 'raw-pickup-close':
        await rawPickup?.close();
        rawPickup = null;
        return;
      case 'stats':
        return processStats();
      case 'memory':
        return memory();
      case 'profile-start':
        profiler = new Session();
        profiler.connect();
        await post(profiler, 'Profiler.enable');
        await post(profiler, 'Profiler.start');
        return;
      case 'profile-stop': {
        if (!profiler) throw new Error('profiler not started');
        const { profile } = (await post(profiler, 'Profiler.stop')) as { profile: unknown };
        profiler.disconnect();
        profiler = null;
        mkdirSync(dirname(m.file), { recursive: true });
        writeFileSync(m.file, JSON.stringify(profile));
        return;
      }
      case 'close-holds':
        holds.gate = new Promise<void>((resolve) => (holds.open = resolve));
        return;
      case 'open-holds':
        holds.open();
        holds.gate = Promise.resolve();
        return;
      case 'exit':
        await engine?.close().catch(() => undefined);
        await raw?.close().catch(() => undefined);
        await rawPickup?.close().catch(() => undefined);
        process.exit(0);
    }
  };
  process.on('message', (m: WorkerCommand) => {
    handle(m).then(
      (value) => reply({ id: m.id, ok: true, value }),
      (err: unknown) => reply({ id: m.id, ok: false, error: (err as Error)?.stack ?? String(err) }),
    );
  });
  // The parent going away (Ctrl-C, crash) closes the IPC channel: do not linger.
  process.on('disconnect', () => process.exit(0));
  reply({ event: 'ready' });
}

if (require.main === module) void main();
