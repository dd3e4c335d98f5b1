import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import { adminUrl, log, parseBenchArgs, rotate, runMeta } from './cli';
import { dropDatabase, withDatabase } from './database';
import { spread, Spread } from './stats';

/**
 * `npm run bench:peers [-- --quick] [-- --repeat N] [-- --out FILE]`
 * The peer libraries on the same server, each workload in a fresh database of its own and a fresh
 * OS process (bench/peers/*.mjs), repeated in rotating order, and the engine on the same workloads the
 * same way (bench/peers/engine.ts), so that every engine ÷ peer ratio is computed per repeat from
 * workloads that ran next to each other. The peers live in bench/package.json,
 * installed here by `npm ci --prefix bench` when missing, so they never weigh on the library's own
 * install. See bench/peers/README.md for what each workload does.
 */

interface PeersConfig {
  repeat: number;
  /** Units per workload (steps, workflows or jobs), by workload name. */
  n: Record<string, number>;
  concurrency: number;
}

/** One workload of one peer, as bench/peers/<peer>.mjs runs it. */
export interface PeerWorkload {
  peer: 'engine' | 'dbos' | 'graphile-worker' | 'pg-boss';
  workload: string;
  /** Figure key in the results: `<peer>.<workload>`. */
  key: string;
}

export const PEER_WORKLOADS: PeerWorkload[] = [
  ['engine', 'step-latency'],
  ['engine', 'workflows-direct'],
  ['engine', 'drain'],
  ['engine', 'pickup'],
  ['dbos', 'step-latency'],
  ['dbos', 'workflows-direct'],
  ['dbos', 'workflows-queue'],
  ['graphile-worker', 'drain'],
  ['graphile-worker', 'pickup'],
  ['pg-boss', 'drain'],
  ['pg-boss', 'drain-batch10'],
  ['pg-boss', 'pickup'],
].map(([peer, workload]) => ({ peer, workload, key: `${peer}.${workload}` }) as PeerWorkload);

const FULL: PeersConfig = {
  repeat: 2,
  n: {
    'step-latency': 2000,
    'workflows-direct': 3000,
    'workflows-queue': 2000,
    drain: 5000,
    'drain-batch10': 5000,
    pickup: 200,
  },
  concurrency: 16,
};
const QUICK: PeersConfig = {
  ...FULL,
  n: {
    'step-latency': 1000,
    'workflows-direct': 1500,
    'workflows-queue': 1000,
    drain: 2500,
    'drain-batch10': 2500,
    pickup: 100,
  },
};

/** `--smoke` (CI): proves the part runs, measures nothing worth reading. */
const SMOKE: PeersConfig = {
  ...FULL,
  n: {
    'step-latency': 60,
    'workflows-direct': 60,
    'workflows-queue': 60,
    drain: 120,
    'drain-batch10': 120,
    pickup: 8,
  },
};

const USAGE = `usage: npm run bench:peers -- [--quick] [--repeat N] [--out FILE]
  --smoke      tiny workloads (CI checks that the part still runs)
  --quick      smaller workloads (default: 2 repeats of every workload, ~10 minutes)
  --repeat N   repeat every workload N times (N >= 2)
  --out FILE   where to write the JSON results (default bench/peers-results.json)
  DATABASE_URL admin connection (default postgres://root@127.0.0.1:5432/postgres)`;

const BENCH_DIR = __dirname;
const PEER_PACKAGES = ['@dbos-inc/dbos-sdk', 'graphile-worker', 'pg-boss'];

/** What a runner prints as its last stdout line. */
export interface PeerSample {
  peer: string;
  version: string;
  workload: string;
  n: number;
  concurrency?: number;
  perSecond?: number | null;
  elapsedMs?: number | null;
  p50Ms?: number | null;
  p99Ms?: number | null;
  statementsPerUnit?: number | null;
  commitsPerUnit?: number | null;
  notes?: string;
  [k: string]: unknown;
}

/** Installs bench/package.json's peers (npm ci) unless every one of them is there already. */
export function ensurePeersInstalled(): Record<string, string> {
  const installed = () =>
    PEER_PACKAGES.every((p) => existsSync(join(BENCH_DIR, 'node_modules', p, 'package.json')));
  if (!installed()) {
    log('installing the peer libraries: npm ci --prefix bench (bench/package-lock.json)');
    execFileSync('npm', ['ci', '--prefix', BENCH_DIR, '--no-audit', '--no-fund', '--loglevel=error'], {
      stdio: ['ignore', 'inherit', 'inherit'],
    });
  }
  return Object.fromEntries(
    PEER_PACKAGES.map((p) => [
      p,
      JSON.parse(readFileSync(join(BENCH_DIR, 'node_modules', p, 'package.json'), 'utf8')).version as string,
    ]),
  );
}

async function withAdmin<T>(admin: string, fn: (c: Client) => Promise<T>): Promise<T> {
  const c = new Client({ connectionString: admin });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end().catch(() => undefined);
  }
}

/** Runs one workload in a fresh database and a fresh process; the runner's JSON line. */
export async function runPeer(
  admin: string,
  w: PeerWorkload,
  n: number,
  concurrency: number,
): Promise<PeerSample> {
  const name = `dx_peer_${randomBytes(4).toString('hex')}`;
  await withAdmin(admin, (c) => c.query(`create database ${name}`));
  try {
    const runner =
      w.peer === 'engine'
        ? ['-r', 'ts-node/register/transpile-only', join(BENCH_DIR, 'peers', 'engine.ts')]
        : [join(BENCH_DIR, 'peers', `${w.peer}.mjs`)];
    const args = [
      ...runner,
      '--url',
      withDatabase(admin, name),
      '--workload',
      w.workload,
      '--n',
      String(n),
      '--concurrency',
      String(concurrency),
    ];
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 300_000);
    const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
    clearTimeout(timer);
    const last = stdout.trim().split('\n').pop() ?? '';
    if (code !== 0 || !last.startsWith('{')) {
      throw new Error(`${w.key} exited ${code}:\n${stderr.slice(-2000)}\n${stdout.slice(-500)}`);
    }
    return JSON.parse(last) as PeerSample;
  } finally {
    await dropDatabase(admin, name).catch(() => undefined);
  }
}

/** Per workload: the samples and the spread of each numeric figure over the repeats. */
export interface PeerFigures {
  key: string;
  samples: PeerSample[];
  perSecond: Spread;
  p50Ms: Spread;
  p99Ms: Spread;
  statementsPerUnit: Spread;
  commitsPerUnit: Spread;
}

/** Engine ÷ peer (or peer ÷ engine for latencies: "how many times faster"), per repeat. */
export interface PeerRatioDef {
  key: string;
  label: string;
  num: [string, 'perSecond' | 'p50Ms'];
  den: [string, 'perSecond' | 'p50Ms'];
  target?: { op: '<=' | '>='; value: number };
}

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
    target: { op: '>=', value: 4 },
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
    key: 'graphilePickup',
    label: 'pickup p50: graphile-worker / engine',
    num: ['graphile-worker.pickup', 'p50Ms'],
    den: ['engine.pickup', 'p50Ms'],
  },
  {
    key: 'pgbossPickup',
    label: 'pickup p50: pg-boss / engine',
    num: ['pg-boss.pickup', 'p50Ms'],
    den: ['engine.pickup', 'p50Ms'],
  },
];

/** Each ratio per repeat (both figures from the same repeat), then median / min / max. */
function peerRatios(samples: Map<string, PeerSample[]>) {
  return PEER_RATIOS.map((q) => {
    const num = samples.get(q.num[0]) ?? [];
    const den = samples.get(q.den[0]) ?? [];
    const per: number[] = [];
    for (let i = 0; i < Math.min(num.length, den.length); i++) {
      const a = num[i][q.num[1]];
      const b = den[i][q.den[1]];
      if (typeof a === 'number' && typeof b === 'number') per.push(a / b);
    }
    const s = spread(per);
    const meetsTarget = q.target
      ? q.target.op === '>='
        ? s.median >= q.target.value
        : s.median <= q.target.value
      : undefined;
    return { ...q, ...s, meetsTarget };
  });
}

function figures(key: string, samples: PeerSample[]): PeerFigures {
  const of = (f: keyof PeerSample) =>
    spread(samples.map((s) => s[f]).filter((v): v is number => typeof v === 'number'));
  return {
    key,
    samples,
    perSecond: of('perSecond'),
    p50Ms: of('p50Ms'),
    p99Ms: of('p99Ms'),
    statementsPerUnit: of('statementsPerUnit'),
    commitsPerUnit: of('commitsPerUnit'),
  };
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
  const samples = new Map<string, PeerSample[]>(PEER_WORKLOADS.map((w) => [w.key, []]));
  for (let r = 0; r < cfg.repeat; r++) {
    for (const w of rotate(PEER_WORKLOADS, r)) {
      log(`  [${r + 1}/${cfg.repeat}] ${w.key} (load ${loadavg()[0].toFixed(1)})`);
      const s = await runPeer(admin, w, cfg.n[w.workload], cfg.concurrency);
      samples.get(w.key)!.push(s);
    }
  }
  const results = PEER_WORKLOADS.map((w) => figures(w.key, samples.get(w.key)!));
  const ratios = peerRatios(samples);
  const summary = {
    meta: {
      ...runMeta(started, mode),
      repeats: cfg.repeat,
      versions,
    },
    config: cfg,
    workloads: results,
    ratios,
  };
  printPeers(results);
  console.log('\nEngine / peers, per repeat (side by side in the same rotation), then median (min-max)');
  for (const q of ratios) {
    const t = q.target ? `${q.target.op} ${q.target.value}` : '';
    const v = q.meetsTarget === undefined ? '' : q.meetsTarget ? 'meets target' : 'MISSES target';
    console.log(
      `${q.label.padEnd(56)} ${q.median.toFixed(2)} (${q.min.toFixed(2)}-${q.max.toFixed(2)})  ${t.padEnd(6)} ${v}`,
    );
  }
  writeFileSync(out, `${JSON.stringify(summary, null, 2)}\n`);
  log(`results written to ${out} (${summary.meta.durationSeconds} s)`);
}

function printPeers(results: PeerFigures[]): void {
  const f = (v: Spread, d: number) =>
    Number.isFinite(v.median) ? `${v.median.toFixed(d)} (${v.min.toFixed(d)}-${v.max.toFixed(d)})` : '-';
  console.log('\nPeers (median (min-max) over the repeats)');
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
