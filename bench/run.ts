import 'reflect-metadata';
import { writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { BenchDatabase, dropDatabase, WalWindow } from './database';
import { EngineBench, SequentialResult, TransactionRunResult } from './engine';
import { ConcurrentRaw, LoopResult, RawBench } from './raw';
import { FIGURES, printReport, RATIOS, Report, summarise } from './report';
import { adminUrl, log, parseBenchArgs, rotate, runMeta } from './cli';
import { latency } from './stats';

/**
 * `npm run bench [-- --quick] [-- --repeat N] [-- --out FILE]`
 * The raw node-postgres limit and the engine, measured side by side on one throw-away database.
 * Every repeat runs five phases; inside a phase the raw and the engine workloads alternate in short
 * blocks (in rotating order), so that a noisy neighbour hits both sides alike. See bench/README.md.
 */

export interface BenchConfig {
  repeat: number;
  /** Alternating blocks per phase and repeat (phases B-E). */
  blocks: number;
  /**
   * Rounds of phase A (sequential latency) per repeat: each round one block of raw STEP_WRITE_SQL, raw
   * fenced UPDATE and engine steps, in rotating order; the latency ratios are taken per round.
   */
  seqRounds: number;
  /** Phase B also with group commit off (the 'group commit on / off' ratio). */
  groupCommitOff: boolean;
  /** Repeats that run phases B-E too (the later ones run phase A only); all when absent. */
  contextRepeats?: number;
  /** In-flight runs of the engine worker, and connections of the raw workloads. */
  concurrency: number;
  /** Engine pool size. */
  poolSize: number;
  /** Sequential raw statements timed per figure and repeat (after `seqWarmup` untimed). */
  seqStatements: number;
  seqWarmup: number;
  /** Compute steps of the sequential engine runs, per repeat (split over the blocks). */
  engineSteps: number;
  /** Timed window of the fixed-duration raw workloads at `concurrency`, per repeat. */
  concurrentMs: number;
  /** Untimed lead-in of each such block. */
  concurrentWarmupMs: number;
  /** Runs x steps of the engine throughput workload, per repeat. */
  throughputRuns: number;
  throughputSteps: number;
  /** Runs of the 3-step loops (raw and engine), per repeat. */
  loopRuns: number;
  /** Untimed runs before the run-loop and throughput phases. */
  warmRuns: number;
  /** Starts timed per enqueue figure and repeat. */
  starts: number;
  /** Durable transactions (and as many plain ones) timed per repeat, split over the blocks. */
  txSteps: number;
}

const FULL: BenchConfig = {
  repeat: 5,
  blocks: 3,
  seqRounds: 8,
  groupCommitOff: true,
  concurrency: 16,
  poolSize: 20,
  seqStatements: 2400,
  seqWarmup: 200,
  engineSteps: 1200,
  concurrentMs: 4500,
  concurrentWarmupMs: 150,
  throughputRuns: 450,
  throughputSteps: 10,
  loopRuns: 900,
  warmRuns: 32,
  starts: 900,
  txSteps: 900,
};

/**
 * `--quick`: phase A (the headline's step commit ÷ raw fenced UPDATE) in 2 x 16 rounds of short blocks (8
 * before: two quick runs' medians differed by 17 %, its rounds spread 1.35-2.79 in one run);
 * phases B-E (no figure of issue 47's table) once, smaller, in 2 blocks, group commit off left out.
 */
const QUICK: BenchConfig = {
  ...FULL,
  repeat: 2,
  blocks: 2,
  seqRounds: 16,
  groupCommitOff: false,
  contextRepeats: 1,
  seqStatements: 1500,
  engineSteps: 800,
  concurrentMs: 2000,
  throughputRuns: 200,
  loopRuns: 400,
  starts: 300,
  txSteps: 300,
};

/** `--smoke` (CI): proves the part runs, measures nothing worth reading. */
const SMOKE: BenchConfig = {
  ...QUICK,
  blocks: 1,
  seqRounds: 2,
  groupCommitOff: true,
  contextRepeats: undefined,
  seqStatements: 100,
  seqWarmup: 20,
  engineSteps: 60,
  concurrentMs: 300,
  concurrentWarmupMs: 50,
  throughputRuns: 32,
  throughputSteps: 3,
  loopRuns: 48,
  warmRuns: 4,
  starts: 48,
  txSteps: 30,
};

const USAGE = `usage: npm run bench:core -- [--quick] [--repeat N] [--out FILE]
  --smoke      seconds: tiny workloads (CI checks that the part still runs)
  --quick      ~30 s: 2 repeats of the latency rounds, the throughput phases once and smaller
               (default: ~4 minutes, 5 repeats of everything)
  --repeat N   repeat every workload N times (N >= 2)
  --out FILE   where to write the JSON results (default bench/core-results.json)
  DATABASE_URL admin connection (default postgres://root@127.0.0.1:5432/postgres); the bench creates
               and drops its own database dx_bench_<random> on that server`;

const benchStart = performance.now();

/** Runs `blocks` rounds of the workloads, in rotating order. */
async function alternate(r: number, blocks: number, workloads: Array<() => Promise<void>>): Promise<void> {
  for (let b = 0; b < blocks; b++) for (const w of rotate(workloads, b + r)) await w();
}

function addWal(into: WalWindow, w: WalWindow | null): void {
  if (!w) return;
  for (const k of Object.keys(into) as Array<keyof WalWindow>) into[k] += w[k];
}

const emptyWal = (): WalWindow => ({
  commits: 0,
  records: 0,
  bytes: 0,
  fpiBytes: 0,
  heapUpdates: 0,
  hotUpdates: 0,
  indexInserts: 0,
});

/** Sum of blocks of a fixed-duration raw workload. */
function sumConcurrent(blocks: ConcurrentRaw[]) {
  const calls = blocks.reduce((a, b) => a + b.calls, 0);
  const seconds = blocks.reduce((a, b) => a + b.seconds, 0);
  return {
    perSec: calls / seconds,
    p50: latency(blocks.flatMap((b) => b.latencies)).p50,
    cpuUs: blocks.reduce((a, b) => a + b.cpuUsPerCall * b.calls, 0) / calls,
  };
}

/** Sum of blocks of a run loop (raw or engine): steady-state and wall-clock rates. */
function sumLoop(blocks: LoopResult[]) {
  const windowS = blocks.reduce((a, b) => a + b.steady.windowMs, 0) / 1000;
  const runs = blocks.reduce((a, b) => a + b.runs, 0);
  return {
    stepsPerSec: blocks.reduce((a, b) => a + b.steady.steps, 0) / windowS,
    runsPerSec: blocks.reduce((a, b) => a + b.steady.runs, 0) / windowS,
    wallRunsPerSec: runs / blocks.reduce((a, b) => a + b.seconds, 0),
    cpuUsPerRun: blocks.reduce((a, b) => a + b.cpuUs, 0) / runs,
    allSteady: blocks.every((b) => b.steady.steady),
  };
}

/** One repeat: five phases, raw and engine alternating inside each. */
async function repeatOnce(
  r: number,
  cfg: BenchConfig,
  db: BenchDatabase,
  raw: RawBench,
  engine: EngineBench,
  report: Report,
): Promise<void> {
  const put = (key: string, value: number) => report.add(key, r, value);
  const B = cfg.blocks;
  const phase = (name: string) =>
    log(
      `  [${r + 1}/${cfg.repeat}] +${((performance.now() - benchStart) / 1000).toFixed(0)} s ${name} ` +
        `(load ${loadavg()[0].toFixed(1)})`,
    );

  // Phase A: sequential latency (1a, 1b, engine step commit) and statement/commit accounting (3).
  phase('sequential: raw STEP_WRITE_SQL, raw fenced UPDATE, engine steps');
  await db.reset();
  const seq = await raw.openSequential(cfg.seqWarmup);
  await engine.warm(4, 3);
  await engine.sequentialRun(Math.min(200, cfg.engineSteps));
  const rawStep: number[] = [];
  const rawUpd: number[] = [];
  const walStep = emptyWal();
  const walUpd = emptyWal();
  const eng: SequentialResult[] = [];
  try {
    const R = cfg.seqRounds;
    const n = Math.round(cfg.seqStatements / R);
    // Each round: a block of each, in rotating order; the p50 of each block, and the ratios per round.
    const round: Record<'step' | 'upd' | 'eng' | 'write', number> = { step: 0, upd: 0, eng: 0, write: 0 };
    const blocks = [
      async () => {
        const s = await seq.stepWrite(n);
        rawStep.push(...s.ms);
        addWal(walStep, s.wal);
        round.step = latency(s.ms).p50;
      },
      async () => {
        const s = await seq.fencedUpdate(n);
        rawUpd.push(...s.ms);
        addWal(walUpd, s.wal);
        round.upd = latency(s.ms).p50;
      },
      async () => {
        const e = await engine.sequentialRun(Math.round(cfg.engineSteps / R));
        eng.push(e);
        round.eng = latency(e.stepMs).p50;
        round.write = latency(e.writeStepMs).p50;
      },
    ];
    for (let b = 0; b < R; b++) {
      for (const block of rotate(blocks, b + r)) await block();
      report.pair('stepLatency', round.eng / round.upd);
      report.pair('writeStepLatency', round.write / round.upd);
      report.pair('sqlShapeLatency', round.step / round.upd);
      report.pair('engineOverLatency', round.eng / round.step);
    }
  } finally {
    seq.close();
  }
  const l1a = latency(rawStep);
  const l1b = latency(rawUpd);
  put('raw.stepWrite.seq.p50', l1a.p50);
  put('raw.stepWrite.seq.p99', l1a.p99);
  put('raw.update.seq.p50', l1b.p50);
  put('raw.update.seq.p99', l1b.p99);
  const call = latency(eng.flatMap((e) => e.stepMs));
  const write = latency(eng.flatMap((e) => e.writeStepMs));
  put('engine.step.seq.p50', call.p50);
  put('engine.step.seq.p99', call.p99);
  put('engine.writeStep.seq.p50', write.p50);
  put('engine.writeStep.seq.p99', write.p99);
  const perStep = eng.flatMap((e) => e.statementsPerStep);
  const steps = eng.reduce((n, e) => n + e.stepsWritten, 0);
  put('engine.statementsPerStep', perStep.reduce((a, b) => a + b, 0) / steps);
  put('engine.statementsPerStep.max', Math.max(...perStep));
  const walEng = emptyWal();
  eng.forEach((e) => addWal(walEng, e.wal));
  if (db.walInspect) {
    const n = rawStep.length;
    put('engine.commitsPerStep', walEng.commits / steps);
    put('raw.stepWrite.commits', walStep.commits / n);
    put('raw.update.walBytes', walUpd.bytes / rawUpd.length);
    put('raw.stepWrite.walBytes', walStep.bytes / n);
    put('engine.walBytesPerStep', walEng.bytes / steps);
    put('raw.update.nonHot', walUpd.heapUpdates / rawUpd.length);
    put('raw.stepWrite.nonHot', walStep.heapUpdates / n);
    put('engine.nonHotPerStep', walEng.heapUpdates / steps);
    put('raw.update.indexInserts', walUpd.indexInserts / rawUpd.length);
    put('raw.stepWrite.indexInserts', walStep.indexInserts / n);
    put('engine.indexInsertsPerStep', walEng.indexInserts / steps);
  }
  const sumNames = (pick: (e: SequentialResult) => Record<string, number>) =>
    eng.reduce<Record<string, number>>((acc, e) => {
      for (const [k, v] of Object.entries(pick(e))) acc[k] = (acc[k] ?? 0) + v;
      return acc;
    }, {});
  report.detail(r, 'sequential', {
    engineRuns: eng.length,
    engineSteps: steps,
    stepStatementNames: sumNames((e) => e.stepStatementNames),
    engineStatements: sumNames((e) => e.totalStatements),
    wal: { rawStepWrite: walStep, rawFencedUpdate: walUpd, engineSteps: walEng },
  });

  if (cfg.contextRepeats !== undefined && r >= cfg.contextRepeats) return;

  // Phase B: throughput at `concurrency` (1b and 1a at 16 connections, engine steps/s at 16 in flight).
  phase(`throughput at ${cfg.concurrency}: raw fenced UPDATE, raw STEP_WRITE_SQL, engine 10-step runs`);
  await db.reset();
  const conc = await raw.openConcurrent();
  const rawUpdC: ConcurrentRaw[] = [];
  const rawStepC: ConcurrentRaw[] = [];
  const engC: LoopResult[] = [];
  const engAlone: LoopResult[] = [];
  try {
    await conc.fencedUpdate(300, 0);
    await conc.stepWrite(300, 0);
    await engine.warm(cfg.warmRuns, cfg.throughputSteps);
    const ms = cfg.concurrentMs / B;
    await alternate(r, B, [
      async () => void rawUpdC.push(await conc.fencedUpdate(ms, cfg.concurrentWarmupMs)),
      async () => void rawStepC.push(await conc.stepWrite(ms, cfg.concurrentWarmupMs)),
      async () =>
        void engC.push(await engine.throughput(Math.round(cfg.throughputRuns / B), cfg.throughputSteps)),
      ...(cfg.groupCommitOff
        ? [
            async () =>
              void engAlone.push(
                await engine.throughput(Math.round(cfg.throughputRuns / B), cfg.throughputSteps, 0),
              ),
          ]
        : []),
    ]);
  } finally {
    conc.close();
  }
  const u = sumConcurrent(rawUpdC);
  const s = sumConcurrent(rawStepC);
  const e = sumLoop(engC);
  put('raw.update.c16.perSec', u.perSec);
  put('raw.update.c16.p50', u.p50);
  put('raw.update.c16.cpuUs', u.cpuUs);
  put('raw.stepWrite.c16.perSec', s.perSec);
  put('raw.stepWrite.c16.p50', s.p50);
  put('raw.stepWrite.c16.cpuUs', s.cpuUs);
  put('engine.steps.c16.perSec', e.stepsPerSec);
  put('engine.runs10.c16.perSec', e.runsPerSec);
  put('engine.runs10.c16.wallPerSec', e.wallRunsPerSec);
  put('engine.steps.c16.cpuUs', e.cpuUsPerRun / cfg.throughputSteps);
  if (engAlone.length) {
    const ea = sumLoop(engAlone);
    put('engine.steps.c16.alone.perSec', ea.stepsPerSec);
    put('engine.steps.c16.alone.cpuUs', ea.cpuUsPerRun / cfg.throughputSteps);
  }
  report.detail(r, 'throughput', { engineBlocks: engC, allSteady: e.allSteady });

  // Phase C: 3-step runs at `concurrency` (1c raw loop vs engine).
  phase(`3-step runs at ${cfg.concurrency}: raw loop, engine`);
  await db.reset();
  await raw.runLoop(cfg.warmRuns, 3);
  await engine.warm(cfg.warmRuns, 3);
  const rawLoop: LoopResult[] = [];
  const engLoop: LoopResult[] = [];
  const perBlock = Math.round(cfg.loopRuns / B);
  await alternate(r, B, [
    async () => void rawLoop.push(await raw.runLoop(perBlock, 3)),
    async () => void engLoop.push(await engine.throughput(perBlock, 3)),
  ]);
  const rl = sumLoop(rawLoop);
  const el = sumLoop(engLoop);
  put('raw.run3.c16.perSec', rl.runsPerSec);
  put('raw.run3.c16.wallPerSec', rl.wallRunsPerSec);
  put('raw.run3.cpuUs', rl.cpuUsPerRun);
  put('engine.run3.c16.perSec', el.runsPerSec);
  put('engine.run3.c16.wallPerSec', el.wallRunsPerSec);
  put('engine.run3.cpuUs', el.cpuUsPerRun);
  report.detail(r, 'runLoops', { raw: rawLoop, engine: engLoop });

  // Phase D: enqueue.
  phase('enqueue: raw START_RUN_SQL, RunRepository.start');
  await db.reset();
  await raw.startRuns(50, 1);
  await engine.startRuns(50, 1);
  const starts: Record<string, { n: number; seconds: number }[]> = {};
  const timed = (key: string, fn: () => Promise<{ n: number; seconds: number }>) => async () => {
    (starts[key] ??= []).push(await fn());
  };
  const n = Math.round(cfg.starts / B);
  await alternate(r, B, [
    timed('raw.start.seq.perSec', () => raw.startRuns(n, 1)),
    timed('engine.start.seq.perSec', () => engine.startRuns(n, 1)),
    timed('raw.start.c16.perSec', () => raw.startRuns(n, cfg.concurrency)),
    timed('engine.start.c16.perSec', () => engine.startRuns(n, cfg.concurrency)),
  ]);
  for (const [key, blocks] of Object.entries(starts)) {
    put(key, blocks.reduce((a, b) => a + b.n, 0) / blocks.reduce((a, b) => a + b.seconds, 0));
  }

  // Phase E: a durable transaction (@DurableTransaction, one INSERT into an app table) against a plain
  // BEGIN; INSERT; COMMIT with the same INSERT, sequential, one run at a time, as phase A.
  phase('durable transactions: plain BEGIN/INSERT/COMMIT, engine @DurableTransaction steps');
  await db.reset();
  const plainSeq = await raw.openSequential(cfg.seqWarmup);
  const plain: number[] = [];
  const walPlain = emptyWal();
  const tx: TransactionRunResult[] = [];
  try {
    await plainSeq.plainTransaction(cfg.seqWarmup);
    await engine.transactionRun(Math.min(50, cfg.txSteps));
    const n = Math.round(cfg.txSteps / B);
    await alternate(r, B, [
      async () => {
        const p = await plainSeq.plainTransaction(n);
        plain.push(...p.ms);
        addWal(walPlain, p.wal);
      },
      async () => void tx.push(await engine.transactionRun(n)),
    ]);
  } finally {
    plainSeq.close();
  }
  const lp = latency(plain);
  const txMs = tx.flatMap((t) => t.stepMs);
  const lt = latency(txMs);
  const perSec = (ms: number[]) => (1000 * ms.length) / ms.reduce((a, b) => a + b, 0);
  put('raw.tx.seq.p50', lp.p50);
  put('raw.tx.seq.p99', lp.p99);
  put('raw.tx.seq.perSec', perSec(plain));
  put('engine.tx.seq.p50', lt.p50);
  put('engine.tx.seq.p99', lt.p99);
  put('engine.tx.seq.perSec', perSec(txMs));
  const trips = tx.flatMap((t) => t.roundTripsPerStep);
  put('engine.tx.roundTrips', trips.reduce((a, b) => a + b, 0) / trips.length);
  put('engine.tx.roundTrips.max', Math.max(...trips));
  const walTx = emptyWal();
  tx.forEach((t) => addWal(walTx, t.wal));
  if (db.walInspect) {
    put('engine.tx.commitsPerStep', walTx.commits / txMs.length);
    put('raw.tx.commits', walPlain.commits / plain.length);
    put('engine.tx.walBytes', walTx.bytes / txMs.length);
    put('raw.tx.walBytes', walPlain.bytes / plain.length);
  }
  report.detail(r, 'transactions', {
    engineRuns: tx.length,
    engineTransactions: txMs.length,
    plainTransactions: plain.length,
    statementNames: tx.reduce<Record<string, number>>((acc, t) => {
      for (const [k, v] of Object.entries(t.stepStatementNames)) acc[k] = (acc[k] ?? 0) + v;
      return acc;
    }, {}),
    wal: { plain: walPlain, engine: walTx },
  });
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
    join(__dirname, 'core-results.json'),
  );
  const admin = adminUrl();
  const started = Date.now();
  log(`creating the bench database on ${new URL(admin).host} ...`);
  const db = await BenchDatabase.create(admin);
  log(`database ${db.name} (schema applied with runDurableMigrations)`);
  if (!db.walInspect) log('pg_walinspect unavailable: commit and WAL figures are skipped');

  let interrupted = false;
  process.once('SIGINT', () => {
    interrupted = true;
    log(`interrupted: dropping ${db.name}`);
    void dropDatabase(admin, db.name).finally(() => process.exit(130));
  });

  const report = new Report(FIGURES, RATIOS);
  const loads: number[] = [];
  let raw: RawBench | undefined;
  let engine: EngineBench | undefined;
  try {
    raw = new RawBench(db, cfg.concurrency);
    engine = await EngineBench.boot(db, cfg.concurrency, cfg.poolSize);
    for (let r = 0; r < cfg.repeat && !interrupted; r++) {
      await repeatOnce(r, cfg, db, raw, engine, report);
      loads.push(loadavg()[0]);
    }
  } finally {
    await engine?.close().catch((e) => log(`engine close failed: ${(e as Error).message}`));
    await raw?.close().catch((e) => log(`raw pool close failed: ${(e as Error).message}`));
    await db.close().catch((e) => log(`could not drop ${db.name}: ${(e as Error).message}`));
  }

  const meta = {
    ...runMeta(started, mode),
    loadAverageAfterEachRepeat: loads.map((l) => Number(l.toFixed(2))),
    postgres: db.serverVersion,
    database: db.name,
    checkpointBeforeEachPhase: db.canCheckpoint,
    walInspect: db.walInspect,
  };
  const summary = summarise(report, cfg, meta);
  printReport(summary);
  writeFileSync(out, `${JSON.stringify(summary, null, 2)}\n`);
  log(`\nresults written to ${out} (${meta.durationSeconds} s)`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
