import { Pool, PoolClient } from 'pg';
import { WAKE_CHANNEL } from '../src/durable-execution.constants';
import { DEFAULT_NAMES } from '../src/store/durable-names';
import { CLAIM_RUNS_SQL as claimRunsSql } from '../src/store/run-state/claim-runs';
import { STEP_WRITE_SQL as stepWriteSql } from '../src/store/run-state/step-write';
import { FINISH_RUN_SQL as finishRunSql } from '../src/store/run-state/finish-run';
import { START_RUN_SQL as startRunSql } from '../src/store/run-control.store';
import { BenchDatabase, TX_INSERT, WalWindow } from './database';
import { SteadyMeter } from './stats';

// The engine's statements as it sends them in the default schema (names unqualified).
const CLAIM_RUNS_SQL = claimRunsSql(DEFAULT_NAMES);
const STEP_WRITE_SQL = stepWriteSql(DEFAULT_NAMES);
const FINISH_RUN_SQL = finishRunSql(DEFAULT_NAMES);
const START_RUN_SQL = startRunSql(DEFAULT_NAMES);

/**
 * The raw limit: the statements the engine sends, written by hand on node-postgres, each worker
 * holding one dedicated connection (no pool checkout per statement), every statement a named prepared
 * statement. Nothing here goes through the engine.
 */

/** Lease length the raw workloads pass where the engine passes `worker.leaseTtlMs` (default 30 s). */
const LEASE_TTL_MS = 30_000;
/** The step name the engine gives `BenchWorkflow.step`, so rows and events have the same size. */
const STEP_NAME = 'BenchWorkflow.step';
/** Kind of the runs the raw loop and the raw starts create (the engine never claims it). */
export const RAW_KIND = 'bench.raw';

/** The simplest possible fenced UPDATE of a run row. */
export const FENCED_UPDATE_SQL = `update ai_runs set cursor = $1, updated_at = now() where id = $2 and worker_id = $3 and epoch = $4`;

/**
 * CLAIM_RUNS_SQL's (and CLAIM_LIMITED_SQL's) values for a claim written by hand: weight 1 per kind, no
 * runs excluded, and no hand-off slots offered ($8-$10 all 0), so a raw claim never takes part in hand-off.
 */
export function claimValues(workerId: string, kinds: string[], limit: number, leaseMs: number): unknown[] {
  return [workerId, kinds, limit, leaseMs, [], kinds, kinds.map(() => 1), 0, 0, 0];
}

/** The rows of the runs a claim took: a claim of nothing answers one row with id null. */
export function claimedRows<R extends { id?: unknown }>(rows: R[]): R[] {
  return rows.filter((r) => r.id != null);
}

/** A run this connection owns (it put the row in `running` itself, or claimed it). */
interface OwnedRun {
  id: string;
  epoch: number;
}

/** The raw loops' finish: FINISH_RUN_SQL with the parameters the engine sends for a success. */
export async function rawFinish(
  c: PoolClient,
  run: { id: string; epoch: number },
  workerId: string,
  output: unknown,
): Promise<void> {
  const fin = await c.query({
    name: 'bench_finish',
    text: FINISH_RUN_SQL,
    values: [
      run.id,
      workerId,
      run.epoch,
      'succeeded',
      JSON.stringify(output),
      null,
      0,
      0,
      '[]',
      'run.succeeded',
      '{}',
      null,
      WAKE_CHANNEL,
      [], // $14: commands reserved but never sent (none)
      false, // $15: the workflow has no onCancel
      null, // $16: no step commit fused into the finish (the raw loops commit their steps alone)
      null, // $17: its event payload
    ],
  });
  if (fin.rowCount !== 1) throw new Error(`raw finish lost the fence of run ${run.id}`);
}

/**
 * Writes step after step of one run with the engine's STEP_WRITE_SQL, parameters built exactly as
 * RunStateStore.writeStep builds them for a compute step commit.
 */
export class RawStepWriter {
  private step = 0;
  constructor(
    private readonly client: PoolClient,
    private readonly run: OwnedRun,
    private readonly workerId: string,
  ) {}

  async write(): Promise<void> {
    const i = this.step++;
    const cursor = { step: i, name: STEP_NAME, status: 'done', attempt: 1, item: null };
    const checkpoints = `[{"step_index":${i},"step_name":${JSON.stringify(STEP_NAME)},"output":{"i":${i}},"meta":null}]`;
    const res = await this.client.query({
      name: 'bench_step_write',
      text: STEP_WRITE_SQL,
      values: [
        this.run.id,
        this.workerId,
        this.run.epoch,
        JSON.stringify(cursor),
        LEASE_TTL_MS,
        checkpoints,
        1,
        'run.checkpoint_saved',
        JSON.stringify({ step: i, name: STEP_NAME, kind: 'compute' }),
        true,
      ],
    });
    if (res.rows.length !== 1) throw new Error(`raw step write lost the fence of run ${this.run.id}`);
  }
}

/** The plain fenced UPDATE on one run, one statement per call. */
export class RawFencedUpdater {
  private step = 0;
  constructor(
    private readonly client: PoolClient,
    private readonly run: OwnedRun,
    private readonly workerId: string,
  ) {}

  async write(): Promise<void> {
    const i = this.step++;
    const cursor = { step: i, name: STEP_NAME, status: 'done', attempt: 1, item: null };
    const res = await this.client.query({
      name: 'bench_fenced_update',
      text: FENCED_UPDATE_SQL,
      values: [JSON.stringify(cursor), this.run.id, this.workerId, this.run.epoch],
    });
    if (res.rowCount !== 1) throw new Error(`raw fenced update matched ${res.rowCount} rows`);
  }
}

/** CPU time (user + system) this process spent while `fn` ran, in microseconds. */
export async function withCpu<T>(fn: () => Promise<T>): Promise<{ result: T; cpuUs: number }> {
  const before = process.cpuUsage();
  const result = await fn();
  const d = process.cpuUsage(before);
  return { result, cpuUs: d.user + d.system };
}

/** Times `n` sequential calls of `op`; milliseconds per call. */
export async function timeSequential(n: number, op: () => Promise<void>): Promise<number[]> {
  const out = new Array<number>(n);
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await op();
    out[i] = performance.now() - t0;
  }
  return out;
}

/** Sequential latencies plus the WAL the timed calls produced. */
export interface SequentialRaw {
  ms: number[];
  wal: WalWindow | null;
}

/** A fixed-duration concurrent loop: calls completed in the window, their latencies, client CPU. */
export interface ConcurrentRaw {
  calls: number;
  seconds: number;
  latencies: number[];
  /** Client (this process) CPU per call, warm-up included, in microseconds. */
  cpuUsPerCall: number;
}

/**
 * Each op drives its own loop for `warmupMs` (untimed) then `durationMs`, and the calls that complete
 * inside the timed window are counted.
 */
export async function timeConcurrent(
  ops: Array<() => Promise<void>>,
  durationMs: number,
  warmupMs: number,
): Promise<ConcurrentRaw> {
  const start = performance.now() + warmupMs;
  const end = start + durationMs;
  const latencies: number[] = [];
  let calls = 0;
  const { cpuUs } = await withCpu(() =>
    Promise.all(
      ops.map(async (op) => {
        for (;;) {
          const t0 = performance.now();
          if (t0 >= end) return;
          await op();
          calls++;
          const t1 = performance.now();
          if (t1 >= start && t1 <= end) latencies.push(t1 - t0);
        }
      }),
    ),
  );
  return { calls: latencies.length, seconds: durationMs / 1000, latencies, cpuUsPerCall: cpuUs / calls };
}

/** One dedicated connection with one run for each statement shape, kept for a series of blocks. */
export interface RawSequentialSession {
  stepWrite(n: number): Promise<SequentialRaw>;
  fencedUpdate(n: number): Promise<SequentialRaw>;
  /** (5) A plain transaction with the durable transaction's INSERT: BEGIN, INSERT, COMMIT (3 round trips). */
  plainTransaction(n: number): Promise<SequentialRaw>;
  close(): void;
}

/** `connections` dedicated connections, each with its own run per statement shape. */
export interface RawConcurrentSession {
  stepWrite(durationMs: number, warmupMs: number): Promise<ConcurrentRaw>;
  fencedUpdate(durationMs: number, warmupMs: number): Promise<ConcurrentRaw>;
  close(): void;
}

/** Result of one block of the raw run loop. */
export interface LoopResult {
  runs: number;
  seconds: number;
  steady: ReturnType<SteadyMeter['result']>;
  cpuUs: number;
}

/** The hand-written side of the benchmark, on its own pool of dedicated connections. */
export class RawBench {
  readonly pool: Pool;

  constructor(
    private readonly db: BenchDatabase,
    readonly connections: number,
  ) {
    this.pool = new Pool({
      connectionString: db.url,
      max: connections,
      idleTimeoutMillis: 0,
      application_name: 'dx-bench-raw',
    });
    this.pool.on('error', (err) =>
      process.stderr.write(`raw pool: idle connection failed: ${err.message}\n`),
    );
  }

  private async clients(n: number): Promise<PoolClient[]> {
    return Promise.all(Array.from({ length: n }, () => this.pool.connect()));
  }

  /** Timed calls inside a WAL window. */
  private async sequential(n: number, op: () => Promise<void>): Promise<SequentialRaw> {
    const from = await this.db.walPosition();
    const ms = await timeSequential(n, op);
    const to = await this.db.walPosition();
    return { ms, wal: await this.db.walWindow(from, to) };
  }

  /** (1a, 1b sequential) Puts two runs in `running` and warms both statements on one connection. */
  async openSequential(warmup: number): Promise<RawSequentialSession> {
    const [a, b] = await this.db.insertRunning(2, RAW_KIND, 'raw-seq');
    const [c] = await this.clients(1);
    const step = new RawStepWriter(c, a, 'raw-seq');
    const update = new RawFencedUpdater(c, b, 'raw-seq');
    for (let i = 0; i < warmup; i++) {
      await step.write();
      await update.write();
    }
    let item = 0;
    const plain = async () => {
      await c.query('begin');
      await c.query({ ...TX_INSERT, values: [item++, 'plain'] });
      await c.query('commit');
    };
    return {
      stepWrite: (n) => this.sequential(n, () => step.write()),
      fencedUpdate: (n) => this.sequential(n, () => update.write()),
      plainTransaction: (n) => this.sequential(n, plain),
      close: () => c.release(),
    };
  }

  /** (1a, 1b at `connections`) Each connection gets its own run for each statement shape. */
  async openConcurrent(): Promise<RawConcurrentSession> {
    const n = this.connections;
    const runs = await this.db.insertRunning(2 * n, RAW_KIND, 'raw-c');
    const cs = await this.clients(n);
    const steps = cs.map((c, i) => new RawStepWriter(c, runs[i], 'raw-c'));
    const updates = cs.map((c, i) => new RawFencedUpdater(c, runs[n + i], 'raw-c'));
    return {
      stepWrite: (d, w) =>
        timeConcurrent(
          steps.map((s) => () => s.write()),
          d,
          w,
        ),
      fencedUpdate: (d, w) =>
        timeConcurrent(
          updates.map((s) => () => s.write()),
          d,
          w,
        ),
      close: () => cs.forEach((c) => c.release()),
    };
  }

  /**
   * (1c) The raw run loop: `connections` workers, each on its own connection, repeatedly claim one run
   * (CLAIM_RUNS_SQL), write `steps` fenced step commits (STEP_WRITE_SQL) and finish it (FINISH_RUN_SQL)
   * until nothing is left to claim.
   */
  async runLoop(runs: number, steps: number): Promise<LoopResult> {
    await this.db.insertPending(runs, RAW_KIND, steps);
    const cs = await this.clients(this.connections);
    try {
      const meter = new SteadyMeter();
      const t0 = performance.now();
      const { result, cpuUs } = await withCpu(() =>
        Promise.all(cs.map((c, w) => this.driveRuns(c, `raw-loop-${w}`, steps, meter))),
      );
      const seconds = (performance.now() - t0) / 1000;
      const done = result.reduce((a, b) => a + b, 0);
      if (done !== runs) throw new Error(`raw loop finished ${done} runs, expected ${runs}`);
      return { runs, seconds, steady: meter.result(), cpuUs };
    } finally {
      cs.forEach((c) => c.release());
    }
  }

  private async driveRuns(
    c: PoolClient,
    workerId: string,
    steps: number,
    meter: SteadyMeter,
  ): Promise<number> {
    let done = 0;
    for (;;) {
      const claim = await c.query({
        name: 'bench_claim',
        text: CLAIM_RUNS_SQL,
        values: claimValues(workerId, [RAW_KIND], 1, LEASE_TTL_MS),
      });
      const claimed = claimedRows(claim.rows);
      meter.claimed(claimed.length);
      if (!claimed.length) return done;
      const run = { id: claimed[0].id as string, epoch: Number(claimed[0].epoch) };
      const writer = new RawStepWriter(c, run, workerId);
      for (let i = 0; i < steps; i++) {
        await writer.write();
        meter.step();
      }
      await rawFinish(c, run, workerId, { steps });
      meter.finished();
      done++;
    }
  }

  /** START_RUN_SQL by hand, as RunRepository.start sends it: `n` inserts from `concurrency` connections. */
  async startRuns(n: number, concurrency: number): Promise<{ n: number; seconds: number }> {
    const cs = await this.clients(concurrency);
    try {
      let next = 0;
      const t0 = performance.now();
      await Promise.all(
        cs.map(async (c) => {
          while (next++ < n) {
            await c.query({
              name: 'bench_start',
              text: START_RUN_SQL,
              values: [
                RAW_KIND,
                JSON.stringify({ steps: 3 }),
                null,
                5,
                null,
                0,
                JSON.stringify({ kind: RAW_KIND, idempotencyKey: null }),
                WAKE_CHANNEL,
                null, // concurrency key
                null, // tags
                1, // kind version (RunRepository.start pins the newest one the process registers)
                true, // a hand-off allowed (an unlimited kind; no worker offers a slot here)
              ],
            });
          }
        }),
      );
      return { n, seconds: (performance.now() - t0) / 1000 };
    } finally {
      cs.forEach((c) => c.release());
    }
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}
