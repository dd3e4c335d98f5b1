import { writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { alternateBlocks, Checkpointer } from './blocks';
import { adminUrl, log, parseBenchArgs, runMeta } from './cli';
import { compileBench } from './compile';
import {
  BlockPeer,
  ensurePeersInstalled,
  PeerName,
  PeerSample,
  PeerWorkload,
  runOnce,
  startBlocks,
  stopBlocks,
  workloadOf,
} from './peer-runs';
import { formatSpread, pairRatios, spread, Spread } from './stats';

export { ensurePeersInstalled } from './peer-runs';

/**
 * `npm run bench:peers [-- --quick | --smoke] [-- --repeat N] [-- --out FILE]`
 * The peer libraries on the same server against the engine on the same workloads. Per workload a group
 * of runners (bench/peers/*.mjs, and bench/peers/engine.ts compiled to plain JavaScript), each in a fresh
 * database and process of its own, all booted and warmed up (untimed) before the first timed block; then
 * `rounds` rounds of short timed blocks, one per runner, in an order that rotates from round to round
 * (A B, B A, A B ...). Every engine ÷ peer ratio is taken per round, from two blocks measured one right
 * after the other, and reported as the median of the rounds with its spread. A CHECKPOINT before each
 * block of the throughput workloads gives every block the same start (the latency workloads write a
 * few pages: their p50 does not feel it, and 40 more CHECKPOINTs would cost 5-15 s). pg-boss's
 * workloads (no block mode: a drain needs a fresh producer and consumer) run once per repeat, as
 * before, in full runs and smoke runs only: no headline figure comes from them. See
 * bench/peers/README.md for what each workload does.
 */

interface PeersConfig {
  /** Rounds of alternating blocks per workload group (`--repeat`). */
  repeat: number;
  /**
   * Rounds for a group whose blocks are short and whose ratio's pairs spread widely, by the engine's
   * workload (`--repeat` sets the other groups' rounds, not these).
   */
  rounds?: Record<string, number>;
  /** Units per block (steps, workflows or jobs), by workload. */
  block: Record<string, number>;
  /** Untimed units each runner does before its first block, by workload. */
  warmup: Record<string, number>;
  /** DBOS through a queue beside DBOS direct (no headline figure). */
  dbosQueue: boolean;
  /** pg-boss's one-shot runs: how often, how many jobs; null: none. */
  oneShot: { repeat: number; n: Record<string, number>; settleMs: number } | null;
  concurrency: number;
}

const FULL: PeersConfig = {
  repeat: 16,
  block: { 'step-latency': 400, 'workflows-direct': 500, 'workflows-queue': 300, drain: 1500, pickup: 50 },
  warmup: { 'step-latency': 200, 'workflows-direct': 300, 'workflows-queue': 200, drain: 500, pickup: 30 },
  dbosQueue: true,
  oneShot: { repeat: 2, n: { drain: 5000, 'drain-batch10': 5000, pickup: 200 }, settleMs: 11000 },
  concurrency: 16,
};
const QUICK: PeersConfig = {
  ...FULL,
  repeat: 10,
  // The step-latency blocks take about a third of a second a pair, and their pairs spread 1.2-2.7:
  // two quick runs' medians of 10 differed by 16 %.
  rounds: { 'step-latency': 24 },
  block: { ...FULL.block, 'step-latency': 150, 'workflows-direct': 250, drain: 500, pickup: 50 },
  dbosQueue: false,
  oneShot: null,
};
/** `--smoke` (CI): proves every runner still runs, measures nothing worth reading. */
const SMOKE: PeersConfig = {
  ...FULL,
  repeat: 2,
  block: { 'step-latency': 30, 'workflows-direct': 30, 'workflows-queue': 20, drain: 60, pickup: 4 },
  warmup: { 'step-latency': 20, 'workflows-direct': 20, 'workflows-queue': 10, drain: 20, pickup: 2 },
  oneShot: { repeat: 1, n: { drain: 60, 'drain-batch10': 60, pickup: 4 }, settleMs: 0 },
};

const USAGE = `usage: npm run bench:peers -- [--quick | --smoke] [--repeat N] [--out FILE]
  --smoke      tiny blocks, every runner once (CI checks that the part still runs)
  --quick      10 rounds of smaller blocks per workload (24 of step latency), no pg-boss, no DBOS queue (default: 16
               rounds, all); either way one untimed round first
  --repeat N   rounds of alternating blocks per workload (N >= 2)
  --out FILE   where to write the JSON results (default bench/peers-results.json)
  DATABASE_URL admin connection (default postgres://root@127.0.0.1:5432/postgres)`;

/** Each group: the engine's workload and the peers' runs of the same workload, alternating in blocks. */
function groups(cfg: PeersConfig): PeerWorkload[][] {
  const g = (workload: string, ...peers: Array<[PeerName, string]>) => [
    workloadOf('engine', workload),
    ...peers.map(([p, w]) => workloadOf(p, w)),
  ];
  return [
    g('step-latency', ['dbos', 'step-latency']),
    g(
      'workflows-direct',
      ['dbos', 'workflows-direct'],
      ...(cfg.dbosQueue ? [['dbos', 'workflows-queue'] as [PeerName, string]] : []),
    ),
    g('drain', ['graphile-worker', 'drain']),
    g('pickup', ['graphile-worker', 'pickup']),
  ];
}

/** Workloads whose blocks write enough that a CHECKPOINT before each block matters. */
const THROUGHPUT = new Set(['workflows-direct', 'drain']);

const ONE_SHOT: PeerWorkload[] = [
  workloadOf('pg-boss', 'drain'),
  workloadOf('pg-boss', 'drain-batch10'),
  workloadOf('pg-boss', 'pickup'),
];

/** Per workload: the samples (one per block or run) and the spread of each figure. */
export interface PeerFigures {
  key: string;
  /** 'blocks': one sample per round of alternating blocks; 'once': one per repeat of a one-shot run. */
  mode: 'blocks' | 'once';
  samples: PeerSample[];
  perSecond: Spread;
  p50Ms: Spread;
  p99Ms: Spread;
  statementsPerUnit: Spread;
  commitsPerUnit: Spread;
}

/** Engine ÷ peer (or peer ÷ engine for latencies: "how many times faster"). */
export interface PeerRatioDef {
  key: string;
  label: string;
  num: [string, 'perSecond' | 'p50Ms'];
  den: [string, 'perSecond' | 'p50Ms'];
  target?: { op: '<=' | '>='; value: number };
}

/** The targets are issue 47's. */
export const PEER_RATIOS: PeerRatioDef[] = [
  {
    key: 'dbosStep',
    label: 'DBOS step p50 / engine step p50',
    num: ['dbos.step-latency', 'p50Ms'],
    den: ['engine.step-latency', 'p50Ms'],
    target: { op: '>=', value: 4 },
  },
  {
    key: 'dbosDirect',
    label: '3-step runs/s, 16 in flight: engine / DBOS direct',
    num: ['engine.workflows-direct', 'perSecond'],
    den: ['dbos.workflows-direct', 'perSecond'],
    target: { op: '>=', value: 3 },
  },
  {
    key: 'dbosQueue',
    label: '3-step runs/s: engine / DBOS through a queue',
    num: ['engine.workflows-direct', 'perSecond'],
    den: ['dbos.workflows-queue', 'perSecond'],
  },
  {
    key: 'graphileDrain',
    label: '1-step runs/s: engine / graphile-worker jobs/s',
    num: ['engine.drain', 'perSecond'],
    den: ['graphile-worker.drain', 'perSecond'],
    target: { op: '>=', value: 1.2 },
  },
  {
    key: 'graphilePickup',
    label: 'pickup p50: graphile-worker / engine',
    num: ['graphile-worker.pickup', 'p50Ms'],
    den: ['engine.pickup', 'p50Ms'],
    target: { op: '>=', value: 1 },
  },
  {
    key: 'pgbossDrain',
    label: '1-step runs/s: engine / pg-boss jobs/s (1 per fetch)',
    num: ['engine.drain', 'perSecond'],
    den: ['pg-boss.drain', 'perSecond'],
  },
  {
    key: 'pgbossDrain10',
    label: '1-step runs/s: engine / pg-boss jobs/s (10 per fetch)',
    num: ['engine.drain', 'perSecond'],
    den: ['pg-boss.drain-batch10', 'perSecond'],
  },
  {
    key: 'pgbossPickup',
    label: 'pickup p50: pg-boss / engine',
    num: ['pg-boss.pickup', 'p50Ms'],
    den: ['engine.pickup', 'p50Ms'],
  },
];

type Field = 'perSecond' | 'p50Ms' | 'p99Ms' | 'statementsPerUnit' | 'commitsPerUnit';
const values = (samples: PeerSample[], f: Field) =>
  samples.map((s) => (typeof s[f] === 'number' ? (s[f] as number) : NaN));

/**
 * Each ratio per round of blocks when both sides ran in the same rounds ('per pair of blocks'); a ratio
 * of medians where one side is a one-shot run (pg-boss), said so in `how`.
 */
function peerRatios(figs: Map<string, PeerFigures>) {
  return PEER_RATIOS.flatMap((q) => {
    const a = figs.get(q.num[0]);
    const b = figs.get(q.den[0]);
    if (!a || !b) return [];
    const paired = a.mode === 'blocks' && b.mode === 'blocks';
    const s = paired
      ? pairRatios(values(a.samples, q.num[1]), values(b.samples, q.den[1]))
      : spread(values(b.samples, q.den[1]).map((d) => a[q.num[1]].median / d));
    const meetsTarget = q.target
      ? q.target.op === '>='
        ? s.median >= q.target.value
        : s.median <= q.target.value
      : undefined;
    const how = paired ? 'per pair of neighbouring blocks' : 'median of the blocks / each one-shot run';
    return [{ ...q, ...s, meetsTarget, how }];
  });
}

function figures(key: string, mode: PeerFigures['mode'], samples: PeerSample[]): PeerFigures {
  const of = (f: Field) => spread(values(samples, f));
  return {
    key,
    mode,
    samples,
    perSecond: of('perSecond'),
    p50Ms: of('p50Ms'),
    p99Ms: of('p99Ms'),
    statementsPerUnit: of('statementsPerUnit'),
    commitsPerUnit: of('commitsPerUnit'),
  };
}

/** One group: its runners booted together, then `cfg.repeat` (or `cfg.rounds`) rounds of one block each. */
async function runGroup(
  admin: string,
  engineJs: string,
  group: PeerWorkload[],
  cfg: PeersConfig,
  checkpoint: Checkpointer,
): Promise<{ samples: Map<string, PeerSample[]>; closing: Record<string, unknown> }> {
  const started: BlockPeer[] = [];
  const samples = new Map<string, PeerSample[]>(group.map((w) => [w.key, []]));
  const closing: Record<string, unknown> = {};
  try {
    log(
      `  +${since()} s ${group.map((w) => w.key).join(' | ')}: booting and warming up ` +
        `(load ${loadavg()[0].toFixed(1)})`,
    );
    const boots = await Promise.allSettled(
      group.map((w) =>
        startBlocks(admin, engineJs, w, { concurrency: cfg.concurrency, warmup: cfg.warmup[w.workload] }),
      ),
    );
    for (const b of boots) if (b.status === 'fulfilled') started.push(b.value);
    const failed = boots.find((b): b is PromiseRejectedResult => b.status === 'rejected');
    if (failed) throw failed.reason;
    const byKey = new Map(started.map((p) => [p.w.key, p]));
    const rounds = cfg.rounds?.[group[0].workload] ?? cfg.repeat;
    log(`  +${since()} s ${rounds} rounds of blocks`);
    await alternateBlocks(
      rounds,
      group.map((w) => w.key),
      async (key, r) => {
        if (THROUGHPUT.has(group[0].workload)) await checkpoint.run();
        const w = byKey.get(key)!.w;
        const s = (await byKey.get(key)!.runner.block(cfg.block[w.workload])) as PeerSample;
        samples.get(key)![r] = s;
        if (r === rounds - 1 || process.env.BENCH_VERBOSE)
          log(`  [${r + 1}/${rounds}] +${since()} s ${key}: ${brief(s)} (load ${loadavg()[0].toFixed(1)})`);
      },
      // One untimed round first: a runner's first block after its boot is often slow.
      async (key) => {
        if (THROUGHPUT.has(group[0].workload)) await checkpoint.run();
        const w = byKey.get(key)!.w;
        await byKey.get(key)!.runner.block(cfg.block[w.workload]);
      },
    );
  } finally {
    for (const p of started) closing[p.w.key] = await stopBlocks(p);
  }
  return { samples, closing };
}

const t0 = performance.now();
const since = () => ((performance.now() - t0) / 1000).toFixed(0);

const brief = (s: PeerSample) =>
  typeof s.p50Ms === 'number'
    ? `p50 ${s.p50Ms.toFixed(3)} ms`
    : `${typeof s.perSecond === 'number' ? s.perSecond.toFixed(0) : '-'}/s`;

async function main(): Promise<void> {
  const {
    config: cfg,
    out,
    mode,
  } = parseBenchArgs(
    process.argv.slice(2),
    USAGE,
    { full: FULL, quick: QUICK, smoke: SMOKE },
    join(__dirname, 'peers-results.json'),
  );
  const admin = adminUrl();
  const started = Date.now();
  const versions = ensurePeersInstalled();
  log(
    `peers: ${Object.entries(versions)
      .map(([p, v]) => `${p} ${v}`)
      .join(', ')}`,
  );
  const [engineJs] = compileBench('bench-peers', [join(__dirname, 'peers', 'engine.ts')]);
  const checkpoint = await Checkpointer.open(admin);
  const figs = new Map<string, PeerFigures>();
  const closing: Record<string, unknown> = {};
  try {
    for (const group of groups(cfg)) {
      const g = await runGroup(admin, engineJs, group, cfg, checkpoint);
      for (const [key, s] of g.samples) figs.set(key, figures(key, 'blocks', s));
      Object.assign(closing, g.closing);
    }
    if (cfg.oneShot) {
      const once = cfg.oneShot;
      for (let r = 0; r < once.repeat; r++) {
        for (const w of ONE_SHOT) {
          log(`  [${r + 1}/${once.repeat}] ${w.key}, one run (load ${loadavg()[0].toFixed(1)})`);
          const s = await runOnce(admin, engineJs, w, {
            n: once.n[w.workload],
            concurrency: cfg.concurrency,
            settleMs: once.settleMs,
          });
          const prev = figs.get(w.key)?.samples ?? [];
          figs.set(w.key, figures(w.key, 'once', [...prev, s]));
        }
      }
    }
  } finally {
    log(`  +${since()} s done (${checkpoint})`);
    await checkpoint.close();
  }
  const workloads = [...figs.values()];
  const ratios = peerRatios(figs);
  const summary = {
    meta: { ...runMeta(started, mode), rounds: cfg.repeat, versions },
    config: cfg,
    workloads,
    ratios,
    closing,
  };
  printPeers(workloads, cfg);
  console.log('\nEngine / peers: per pair of neighbouring blocks, then median (IQR, min-max)');
  for (const q of ratios) {
    const t = q.target ? `${q.target.op} ${q.target.value}` : '';
    const v = q.meetsTarget === undefined ? '' : q.meetsTarget ? 'meets target' : 'MISSES target';
    console.log(`${q.label.padEnd(56)} ${formatSpread(q).padEnd(40)} ${t.padEnd(6)} ${v}`);
  }
  writeFileSync(out, `${JSON.stringify(summary, null, 2)}\n`);
  log(`results written to ${out} (${summary.meta.durationSeconds} s)`);
}

function printPeers(results: PeerFigures[], cfg: PeersConfig): void {
  const f = (v: Spread, d: number) =>
    Number.isFinite(v.median) ? `${v.median.toFixed(d)} (${v.min.toFixed(d)}-${v.max.toFixed(d)})` : '-';
  console.log(
    `\nPeers: median (min-max) over ${cfg.repeat} blocks per runner (one-shot runs: over the runs)`,
  );
  console.log(
    `${'workload'.padEnd(30)} ${'per second'.padEnd(22)} ${'p50 ms'.padEnd(20)} ${'p99 ms'.padEnd(20)} stmts/commits per unit`,
  );
  for (const r of results) {
    console.log(
      `${r.key.padEnd(30)} ${f(r.perSecond, 0).padEnd(22)} ${f(r.p50Ms, 2).padEnd(20)} ${f(r.p99Ms, 2).padEnd(20)} ` +
        `${f(r.statementsPerUnit, 1)} / ${f(r.commitsPerUnit, 1)}`,
    );
  }
}

if (require.main === module) {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
