/**
 * The engine on the peers' workloads, as one more runner of bench/peers.ts, so that every engine ÷ peer
 * ratio is computed per repeat from workloads that ran next to each other (same rotation, a fresh
 * database and a fresh process each, like the peers' runners):
 *
 *   node -r ts-node/register/transpile-only bench/peers/engine.ts --url URL --workload W [--n N] [--concurrency C]
 *
 * - `step-latency`: 10-step workflows one after the other; each `await this.step(i)` timed as the
 *   workflow sees it (DBOS: each `DBOS.runStep`).
 * - `workflows-direct`: n 3-step runs started with `RunRepository.start` by 16 concurrent callers while
 *   the worker (concurrency 16) drives them; runs/s from the first start to the last run settled
 *   (DBOS: `startWorkflow` with 16 in flight).
 * - `drain`: n 1-step runs inserted first, then the worker (concurrency 16) is woken; runs/s until all
 *   settled (graphile-worker / pg-boss: n jobs added first, then the runner).
 * - `pickup`: an idle worker in this process (poll every 5 s, LISTEN/NOTIFY wake-up); `start()` call
 *   begins → step body entered, one at a time, 2 ms apart (graphile-worker / pg-boss: add → task).
 *
 * Prints one JSON line on stdout, like the peers' runners; logs go to stderr. With `--serve` it warms up,
 * prints `{"ready": true}` and then runs timed blocks on request, one JSON line each (the block mode of
 * bench/peers/common.mjs, `serveBlocks`): bench/peers.ts alternates them with a peer's blocks.
 */
import 'reflect-metadata';
import { createInterface } from 'node:readline';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { DurableExecutionModule, DurableStep, DurableWorkflow, RunRepository } from '../../src';
import { runDurableMigrations } from '../../src/migrations';
import { DurableWorker } from '../../src/engine/worker.service';
import { DurableDatabase } from '../../src/store/durable-database';
import { WAKE_CHANNEL } from '../../src/durable-execution.constants';
import { version } from '../../package.json';

const WORKLOADS: Record<string, { n: number; concurrency: number; warmup: number }> = {
  'step-latency': { n: 2000, concurrency: 1, warmup: 200 },
  'workflows-direct': { n: 3000, concurrency: 16, warmup: 300 },
  drain: { n: 5000, concurrency: 16, warmup: 500 },
  pickup: { n: 200, concurrency: 16, warmup: 30 },
};

/** Where the step bodies report. */
const probe = {
  stepMs: [] as number[],
  entered: null as ((t: number) => void) | null,
  /** Runs whose `run()` returned (their finish is being written). */
  returned: 0,
  /** Resolved by `ran()` once `returned` reaches `target`. */
  waiting: null as { target: number; resolve: () => void } | null,
};

/** A run's `run()` is about to return: count it, wake the waiter when its count is reached. */
function ran(): void {
  probe.returned++;
  if (probe.waiting && probe.returned >= probe.waiting.target) {
    const w = probe.waiting;
    probe.waiting = null;
    w.resolve();
  }
}

@DurableWorkflow('engine.steps10')
class Steps10Workflow {
  async run(): Promise<{ ok: boolean }> {
    for (let i = 0; i < 10; i++) {
      const t0 = performance.now();
      await this.step(i);
      probe.stepMs.push(performance.now() - t0);
    }
    ran();
    return { ok: true };
  }

  @DurableStep()
  async step(i: number): Promise<number> {
    return i;
  }
}

@DurableWorkflow('engine.steps3')
class Steps3Workflow {
  async run(): Promise<{ ok: boolean }> {
    await this.step(0);
    await this.step(1);
    await this.step(2);
    ran();
    return { ok: true };
  }

  @DurableStep()
  async step(i: number): Promise<number> {
    return i;
  }
}

@DurableWorkflow('engine.job1')
class OneStepWorkflow {
  async run(): Promise<{ ok: boolean }> {
    const out = await this.step();
    ran();
    return out;
  }

  @DurableStep()
  async step(): Promise<{ ok: boolean }> {
    probe.entered?.(performance.now());
    return { ok: true };
  }
}

@Module({})
class EngineBenchModule {}

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : undefined;
}

const log = (msg: string) => process.stderr.write(`${msg}\n`);
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const line = (o: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(o)}\n`);

function quantile(samples: number[], q: number): number {
  const s = [...samples].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))];
}

/** The figures of one timed block. */
type BlockFigures = Record<string, unknown>;

async function main(): Promise<void> {
  const url = arg('url');
  const workload = arg('workload') ?? '';
  const defaults = WORKLOADS[workload];
  if (!url || !defaults) throw new Error(`usage: --url URL --workload ${Object.keys(WORKLOADS).join('|')}`);
  const n = Number(arg('n') ?? defaults.n);
  const concurrency = Number(arg('concurrency') ?? defaults.concurrency);
  const warmup = Number(arg('warmup') ?? defaults.warmup);
  const serve = process.argv.includes('--serve');

  await runDurableMigrations({ type: 'postgres', url });
  const app = await NestFactory.createApplicationContext(
    {
      module: EngineBenchModule,
      imports: [
        DurableExecutionModule.forRoot({
          database: { url, poolSize: concurrency + 4, migrationsRun: false },
          worker: { enabled: true, concurrency, pollIntervalMs: 5000 },
          reconciler: { enabled: false },
        }),
      ],
      providers: [Steps10Workflow, Steps3Workflow, OneStepWorkflow],
    },
    { logger: ['error', 'warn'] },
  );
  await app.init();
  const runs = app.get(RunRepository);
  const worker = app.get(DurableWorker);
  const pool = app.get(DurableDatabase).pool;
  let statements = 0;
  const query = pool.query.bind(pool) as (...a: unknown[]) => unknown;
  (pool as unknown as { query: (...a: unknown[]) => unknown }).query = (...a: unknown[]) => {
    statements++;
    return query(...a);
  };
  /**
   * Waits in memory until `total` runs returned from run(), then until the worker has written their
   * finishes. Neither polls: no query to compete with the engine, and no setImmediate loop, which kept
   * this process busy while it waited for the database (a core the server's backends then did not have,
   * and on a loaded machine milliseconds on every step: the engine's step p50 here was 3.9 ms where the
   * core part's was 1-2.6 ms in the same runs).
   */
  const settled = async (total: number) => {
    if (probe.returned < total) {
      await new Promise<void>((resolve) => (probe.waiting = { target: total, resolve }));
    }
    await worker.idle();
  };
  /** Untimed: every run of `kind` so far succeeded. */
  const verify = async (kind: string, total: number) => {
    const { rows } = await pool.query(
      `select count(*) filter (where status = 'succeeded')::int as ok from ai_runs where kind = $1`,
      [kind],
    );
    if (rows[0].ok !== total) throw new Error(`${rows[0].ok} of ${total} runs of ${kind} succeeded`);
  };
  const insertAndWake = async (kind: string, count: number) => {
    await pool.query(`insert into ai_runs (kind, input) select $1, '{}'::jsonb from generate_series(1, $2)`, [
      kind,
      count,
    ]);
    await pool.query(`select pg_notify($1, $2)`, [WAKE_CHANNEL, kind]);
    statements -= 2;
  };
  /** Starts `count` runs from `callers` concurrent callers, as an API would. */
  const startMany = async (kind: string, count: number, callers: number) => {
    let next = 0;
    await Promise.all(
      Array.from({ length: callers }, async () => {
        while (next < count) await runs.start(kind, { i: next++ });
      }),
    );
  };
  const pickups = async (count: number, samples: number[] | null) => {
    for (let i = 0; i < count; i++) {
      const entered = new Promise<number>((resolve) => (probe.entered = resolve));
      const t0 = performance.now();
      await runs.start('engine.job1', { i });
      const t1 = await entered;
      samples?.push(t1 - t0);
      await worker.idle();
      await sleep(2);
    }
  };
  /** Sequential 10-step runs of `count` steps in all. */
  const stepRuns = async (count: number) => {
    for (let r = 0; r < Math.max(1, Math.round(count / 10)); r++) {
      const target = probe.returned + 1;
      await runs.start('engine.steps10', { r });
      await settled(target);
    }
  };
  const KIND: Record<string, string> = {
    'step-latency': 'engine.steps10',
    'workflows-direct': 'engine.steps3',
    drain: 'engine.job1',
    pickup: 'engine.job1',
  };
  const kind = KIND[workload];
  /** One unit of work of the workload, `count` times; untimed when it is the warm-up. */
  const work = async (count: number, samples: number[] | null) => {
    const target = probe.returned + count;
    if (workload === 'step-latency') await stepRuns(count);
    else if (workload === 'workflows-direct') {
      await startMany(kind, count, concurrency);
      await settled(target);
    } else if (workload === 'drain') {
      await insertAndWake(kind, count);
      await settled(target);
    } else await pickups(count, samples);
  };

  // Untimed warm-up.
  if (workload === 'pickup') await sleep(200);
  await work(warmup, null);
  let total = workload === 'step-latency' ? Math.max(1, Math.round(warmup / 10)) : warmup;

  /** One timed block of `count` units. */
  const block = async (count: number): Promise<BlockFigures> => {
    probe.stepMs = [];
    const samples: number[] = [];
    const s0 = statements;
    const t0 = performance.now();
    await work(count, samples);
    const ms = performance.now() - t0;
    const stmts = statements - s0;
    const units = workload === 'step-latency' ? probe.stepMs.length : count;
    total += workload === 'step-latency' ? units / 10 : count;
    if (workload !== 'pickup') await verify(kind, total);
    const lat = workload === 'step-latency' ? probe.stepMs : samples;
    return {
      perSecond: (units * 1000) / ms,
      elapsedMs: ms,
      statementsPerUnit: stmts / units,
      ...(lat.length ? { p50Ms: quantile(lat, 0.5), p99Ms: quantile(lat, 0.99) } : {}),
    };
  };
  const NOTES: Record<string, string> = {
    'step-latency':
      'each `await this.step(i)` of sequential 10-step runs, as the workflow sees it (statements per step: see the core part, exactly 1)',
    'workflows-direct': `RunRepository.start from ${concurrency} concurrent callers while the worker (concurrency ${concurrency}) runs them; window: first start to last run settled`,
    drain: `n 1-step runs inserted in one statement, the worker (concurrency ${concurrency}) woken by one NOTIFY; window: the insert to the last run settled`,
    pickup: 'idle worker in this process (poll every 5 s, LISTEN/NOTIFY); start() call → step body entered',
  };
  const meta = { peer: 'engine', version, workload, concurrency, warmup };
  if (!serve) {
    const out = await block(n);
    await app.close();
    line({ ...meta, n, ...out, notes: NOTES[workload] });
    process.exit(0);
  }
  line({ ready: true, ...meta });
  const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const text of lines) {
    if (!text.trim()) continue;
    const cmd = JSON.parse(text) as { cmd: string; n?: number; i?: number };
    if (cmd.cmd === 'block') line({ block: true, i: cmd.i ?? 0, n: cmd.n, ...(await block(Number(cmd.n))) });
    else if (cmd.cmd === 'end') break;
    else throw new Error(`unknown command ${text}`);
  }
  await app.close();
  line({ end: true, ...meta, notes: NOTES[workload] });
  process.exit(0);
}

main().catch((err) => {
  log(String((err as Error)?.stack ?? err));
  process.exit(1);
});
