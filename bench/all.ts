import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { log, type BenchMode } from './cli';
import { ensurePeersInstalled } from './peers';

/**
 * `npm run bench [-- --quick] [-- --parts core,peers,workers,scale,limits,transport,processes,history,boot] [-- --out FILE]`
 * The whole bench in one run: the engine against the raw node-postgres limit (bench/run.ts), the peer
 * libraries (bench/peers.ts), workers as OS processes with pickup latency and memory
 * (bench/workers.ts), claim cost as history grows (bench/scale.ts) and with concurrency limits
 * (bench/limits.ts), many worker pods on one primary, direct and through PgBouncer (bench/processes.ts),
 * the event history partitioned and not (bench/history.ts), a worker process's boot against a plain Nest
 * app's (bench/boot.ts), one after the other on the same server;
 * and the fenced transport's cost per HTTP request (bench/transport.ts, no database). Each part is its own process and its own throw-away database(s); this file then puts
 * the headline figures side by side, as ratios against their targets, and writes bench/results.json.
 */

const PARTS = [
  'core',
  'peers',
  'workers',
  'scale',
  'limits',
  'transport',
  'processes',
  'history',
  'boot',
] as const;
type Part = (typeof PARTS)[number];

const SCRIPT: Record<Part, string> = {
  core: 'run.ts',
  peers: 'peers.ts',
  workers: 'workers.ts',
  scale: 'scale.ts',
  limits: 'limits.ts',
  transport: 'transport.ts',
  processes: 'processes.ts',
  history: 'history.ts',
  boot: 'boot.ts',
};

const USAGE = `usage: npm run bench -- [--quick | --smoke] [--parts core,peers,workers,scale,limits,transport,processes,history,boot] [--out FILE]
  --smoke      every part with tiny workloads (~3 minutes; .ci/run does this so that no part rots)
  --quick      every part with its smaller workloads and 2 repeats (~8 minutes; default ~14 minutes)
  --parts      run only these parts (their figures only; the headline shows '-' for the rest)
  --out FILE   the combined JSON results (default bench/results.json; Markdown tables beside it, .md)
  DATABASE_URL admin connection (default postgres://root@127.0.0.1:5432/postgres)
Each part also runs alone: npm run bench:core | bench:peers | bench:workers | bench:scale | bench:limits,
  bench:processes (worker pods, direct and through PgBouncer) | bench:history (partitioned events),
  bench:boot (a worker process's start to its first claim, against a plain Nest app's),
  node -r ts-node/register/transpile-only bench/transport.ts`;

function parseArgs(argv: string[]): { mode: BenchMode; parts: Part[]; out: string } {
  let mode: BenchMode = 'full';
  let parts: Part[] = [...PARTS];
  let out = join(__dirname, 'results.json');
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i].split('=', 2);
    const value = () => inline ?? argv[++i];
    if (flag === '--quick') mode = 'quick';
    else if (flag === '--smoke') mode = 'smoke';
    else if (flag === '--out') out = value();
    else if (flag === '--parts') {
      const asked = value().split(',');
      const bad = asked.filter((p) => !PARTS.includes(p as Part));
      if (bad.length) {
        console.error(`--parts: unknown part ${bad.join(', ')} (known: ${PARTS.join(', ')})`);
        process.exit(2);
      }
      parts = PARTS.filter((p) => asked.includes(p));
    } else if (flag === '--help' || flag === '-h') {
      console.log(USAGE);
      process.exit(0);
    } else {
      console.error(`unknown argument ${argv[i]}\n${USAGE}`);
      process.exit(2);
    }
  }
  return { mode, parts, out };
}

/** Runs one part as its own process (its table goes to our stdout); its JSON results. */
async function runPart(part: Part, mode: BenchMode): Promise<any> {
  const out = join(tmpdir(), `dx-bench-${part}-${process.pid}.json`);
  const args = ['-r', 'ts-node/register/transpile-only', join(__dirname, SCRIPT[part]), '--out', out];
  if (mode !== 'full') args.push(`--${mode}`);
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'inherit', 'inherit'] });
  const onSigint = () => child.kill('SIGINT');
  process.once('SIGINT', onSigint);
  const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
  process.removeListener('SIGINT', onSigint);
  if (code !== 0) throw new Error(`bench part '${part}' exited with ${code}`);
  return JSON.parse(readFileSync(out, 'utf8'));
}

/** A headline row: a figure or a ratio of medians, with its target when the issue set one. */
interface Headline {
  label: string;
  value: number;
  unit: string;
  target?: { op: '<=' | '>=' | '='; value: number };
  verdict?: 'met' | 'missed' | 'not measured';
  how: string;
}

type Results = Partial<Record<Part, any>>;

/** Median of a figure of a core / workers summary. */
function fig(part: any, key: string): number {
  return part?.figures?.find((f: any) => f.key === key)?.median ?? NaN;
}

/** Median of a per-repeat ratio of the core / transport summary. */
function ratio(part: any, key: string): number {
  return part?.ratios?.find((r: any) => r.key === key)?.median ?? NaN;
}

function peer(
  peers: any,
  key: string,
  field: 'perSecond' | 'p50Ms' | 'statementsPerUnit' | 'commitsPerUnit',
): number {
  return peers?.workloads?.find((w: any) => w.key === key)?.[field]?.median ?? NaN;
}

/**
 * The engine ÷ peer rows: ratios of the peers part, computed per repeat from the engine's and the
 * peer's runs of the same workload in the same rotation (bench/peers/engine.ts beside the peers).
 */
function peerRows(peers: any, engineK1: number, engineJobK1: number): Headline[] {
  const rows: Headline[] = (peers?.ratios ?? []).map((q: any) => ({
    label: q.label,
    value: q.median,
    unit: 'x',
    target: q.target,
    how: `peers part: per repeat, then the median (${q.num.join(' ')} / ${q.den.join(' ')})`,
  }));
  const graphile = peer(peers, 'graphile-worker.drain', 'perSecond');
  rows.push(
    {
      label: '  1-step runs/s, worker process (workers part) / graphile-worker',
      value: engineK1 / graphile,
      unit: 'x',
      how: 'medians of two parts: workers engine.k1 / peers graphile-worker.drain',
    },
    {
      label: '  job-style runs/s, no step (workers part) / graphile-worker',
      value: engineJobK1 / graphile,
      unit: 'x',
      how: 'medians of two parts: workers engine0.k1 (claim + finish only) / peers graphile-worker.drain',
    },
  );
  return rows;
}

/**
 * The fenced transport's rows, per client: ratios of the transport part, each computed per repeat from
 * neighbouring blocks of a plain client process (nothing installed) and the installed one.
 */
function transportRows(transport: any): Headline[] {
  const how = (what: string) => `transport: ${what}, loopback keep-alive, per repeat, then the median`;
  return (['fetch', 'http'] as const).flatMap((c, i): Headline[] => {
    const name = c === 'fetch' ? 'fetch' : 'node:http';
    return [
      {
        label: `${i ? '  ' : 'fenced transport: '}${name} req/s, gated call / plain`,
        value: ratio(transport, `${c}.seq.gatedOverPlain`),
        unit: 'x',
        target: { op: '>=', value: 0.95 },
        how: how(`${name}, sequential, a fresh WireGate per request / nothing installed`),
      },
      {
        label: `  ${name} req/s @16, gated call / plain`,
        value: ratio(transport, `${c}.c16.gatedOverPlain`),
        unit: 'x',
        target: { op: '>=', value: 0.95 },
        how: how(`${name}, 16 in flight`),
      },
      {
        label: `  ${name} req/s @16, gated call / call, no transport`,
        value: ratio(transport, `${c}.c16.gatedOverOff`),
        unit: 'x',
        how: how(`${name}, 16 in flight, / a call frame without a gate in a process with nothing installed`),
      },
      {
        label: `  ${name} p50, gated call - plain`,
        value: fig(transport, `${c}.seq.p50DeltaUs`),
        unit: 'µs',
        how: how(`${name}, sequential, p50 of each block`),
      },
      {
        label: `  ${name} p50, gated - ungated call, alternating`,
        value: fig(transport, `${c}.paired.deltaUs`),
        unit: 'µs',
        how: 'transport: the gate alone, sequential requests alternating one by one in the installed process',
      },
      {
        label: `  ${name} req/s @16, installed, outside a call / plain`,
        value: ratio(transport, `${c}.c16.outsideOverPlain`),
        unit: 'x',
        how: how(`${name}, 16 in flight, the hooks' cost for requests outside runs`),
      },
    ];
  });
}

/** The socket check's cost per write and the pg check's per query (issue 44), from the same part. */
function socketRows(transport: any): Headline[] {
  const how = (what: string) => `transport: ${what}, loopback, per repeat, then the median`;
  return [
    {
      label: '  socket.write, gated call - plain',
      value: fig(transport, 'socket.seq.usPerWrite'),
      unit: 'µs',
      how: how('bursts of 64 writes of 64 bytes on one net socket, time per burst / 64'),
    },
    {
      label: '  socket.write CPU, gated call - plain',
      value: fig(transport, 'socket.seq.cpuPerWriteUs'),
      unit: 'µs',
      how: how('client CPU per burst of 64 writes / 64'),
    },
    {
      label: '  pg select 1, gated call - plain',
      value: fig(transport, 'pg.seq.usPerRequest'),
      unit: 'µs',
      how: how('one pg.Client, sequential queries, time per query (1 / queries/s)'),
    },
    {
      label: '  pg select 1 p50, gated - ungated call, alternating',
      value: fig(transport, 'pg.paired.deltaUs'),
      unit: 'µs',
      how: 'transport: the gate alone, sequential queries alternating one by one in the installed process',
    },
  ];
}

export function headline(r: Results): Headline[] {
  const { core, peers, workers, scale, limits, transport, boot } = r;
  const engineK1 = fig(workers, 'engine.k1');
  const pickup = fig(workers, 'pickup.proc.db.p50');
  const rows: Headline[] = [
    {
      label: 'statements per compute step commit (client)',
      value: fig(core, 'engine.statementsPerStep'),
      unit: 'count',
      target: { op: '=', value: 1 },
      how: 'core: every pool.query sent during a step call, sequential runs',
    },
    {
      label: 'commits per compute step (server WAL)',
      value: fig(core, 'engine.commitsPerStep'),
      unit: 'count',
      target: { op: '=', value: 1 },
      how: 'core: COMMIT records of the bench database read with pg_walinspect',
    },
    {
      label: 'step commit p50 / raw fenced UPDATE p50',
      value: ratio(core, 'stepLatency'),
      unit: 'x',
      target: { op: '<=', value: 1.5 },
      how: 'core: per repeat, then the median',
    },
    {
      label: '3-step runs/s @16: engine / raw loop',
      value: ratio(core, 'run3Throughput'),
      unit: 'x',
      target: { op: '>=', value: 0.8 },
      how: 'core: steady-state window, per repeat, then the median',
    },
    {
      label: 'durable transaction p50 / plain BEGIN+INSERT+COMMIT p50',
      value: ratio(core, 'txLatency'),
      unit: 'x',
      how: 'core: a @DurableTransaction step with one INSERT against the same INSERT in a plain transaction, sequential, per repeat, then the median',
    },
    {
      label: '  round trips per durable transaction',
      value: fig(core, 'engine.tx.roundTrips'),
      unit: 'count',
      how: 'core: every query of the engine pg clients inside the call (BEGIN with its settings, the INSERT, the fenced write, COMMIT)',
    },
    ...peerRows(peers, engineK1, fig(workers, 'engine0.k1')),
    {
      label: 'pickup p50, idle worker process (start -> step body)',
      value: pickup,
      unit: 'ms',
      target: { op: '<=', value: 2 },
      how: 'workers: database clock on both ends, worker in its own OS process',
    },
    {
      label: 'claim p50 at 1 million / at 1 thousand terminal runs',
      value: scale?.ratios?.dueP50LargestOverSmallest?.median ?? NaN,
      unit: 'x',
      target: { op: '<=', value: 1.2 },
      how: 'scale: CLAIM_RUNS_SQL with one run due, blocks alternating between the databases',
    },
    {
      label: '1-step runs/s: kind limited / no limit',
      value: limits?.runsPerSecond?.ratio?.median ?? NaN,
      unit: 'x',
      how: 'limits: claim + step + finish on one connection, blocks alternating, per block then the median',
    },
    {
      label: 'claim p50, most runs held back by a full limit / none',
      value: limits?.heldBack?.ratio ?? NaN,
      unit: 'x',
      target: { op: '<=', value: 1.2 },
      how: 'limits: CLAIM_LIMITED_SQL of a due run, blocks alternating between a database where 100,000 runs (smoke: 200) of a kind whose limit is full are held back and one where none are; per pair of blocks, then the median',
    },
    {
      label: 'worker ready (start -> first claim) / plain Nest context',
      value: boot?.ratios?.readyOverPlain?.median ?? NaN,
      unit: 'x',
      target: { op: '<=', value: 1.3 },
      how: 'boot: fresh OS processes (compiled JS), the same TypeORM DataSource, alternating, per repeat then the median',
    },
    {
      label: '  worker CPU to first claim / plain Nest context',
      value: boot?.ratios?.cpuOverPlain?.median ?? NaN,
      unit: 'x',
      how: 'boot: user + system CPU of each process until ready, per repeat then the median',
    },
    {
      label: `worker RSS, 1,000 parked + 1,000 queued + 100 in flight`,
      value: fig(workers, 'mem.busy.rss'),
      unit: 'MiB',
      how: 'workers: one worker process, concurrency 100, after a full GC',
    },
    ...transportRows(transport),
    ...socketRows(transport),
  ];
  for (const h of rows) {
    if (!h.target) continue;
    if (!Number.isFinite(h.value)) h.verdict = 'not measured';
    else if (h.target.op === '=') h.verdict = Math.abs(h.value - h.target.value) < 1e-9 ? 'met' : 'missed';
    else if (h.target.op === '<=') h.verdict = h.value <= h.target.value ? 'met' : 'missed';
    else h.verdict = h.value >= h.target.value ? 'met' : 'missed';
  }
  return rows;
}

function printHeadline(rows: Headline[], meta: Record<string, unknown>): void {
  const num = (v: number, unit: string) =>
    !Number.isFinite(v)
      ? '-'
      : unit === 'count'
        ? v.toFixed(3)
        : unit === 'MiB'
          ? v.toFixed(0)
          : unit === 'µs'
            ? v.toFixed(1)
            : v.toFixed(2);
  console.log(
    `\n=== Headline: ${meta.date}, ${meta.cpus} x ${meta.cpuModel}, node ${meta.node}, ${meta.mode} ===\n` +
      `Medians of the parts above; a ratio of two medians where the figures come from different parts.`,
  );
  console.log(
    `${'figure'.padEnd(60)} ${'value'.padStart(9)} ${'unit'.padEnd(6)} ${'target'.padEnd(8)} verdict`,
  );
  for (const h of rows) {
    const target = h.target ? `${h.target.op} ${h.target.value}` : '';
    console.log(
      `${h.label.padEnd(60)} ${num(h.value, h.unit).padStart(9)} ${h.unit.padEnd(6)} ${target.padEnd(8)} ${h.verdict ?? ''}`,
    );
  }
}

/** The headline and the peers as Markdown tables (for docs/PERFORMANCE.md). */
function markdown(rows: Headline[], r: Results, meta: Record<string, unknown>): string {
  const num = (v: number, d = 2) => (Number.isFinite(v) ? v.toFixed(d) : '-');
  const spreadOf = (x: any, d: number) =>
    x && Number.isFinite(x.median) ? `${num(x.median, d)} (${num(x.min, d)}–${num(x.max, d)})` : '-';
  const out = [
    `Run of ${meta.date} (${meta.mode}), ${meta.cpus} × ${meta.cpuModel}, ${meta.memoryGiB} GiB, node ${meta.node}, ` +
      `${String(meta.postgres ?? '').split(' on ')[0]}.`,
    '',
    '| figure | value | target | verdict |',
    '|---|---|---|---|',
    ...rows.map(
      (h) =>
        `| ${h.label.trim()} | ${num(h.value, h.unit === 'count' ? 3 : h.unit === 'MiB' ? 0 : h.unit === 'µs' ? 1 : 2)} ${h.unit === 'x' ? '×' : h.unit} | ` +
        `${h.target ? `${h.target.op} ${h.target.value}` : ''} | ${h.verdict ?? ''} |`,
    ),
  ];
  if (r.peers) {
    out.push(
      '',
      '| peer workload | per second | p50 ms | p99 ms | statements / commits per unit |',
      '|---|---|---|---|---|',
    );
    for (const w of r.peers.workloads) {
      out.push(
        `| ${w.key} | ${spreadOf(w.perSecond, 0)} | ${spreadOf(w.p50Ms, 2)} | ${spreadOf(w.p99Ms, 2)} | ` +
          `${spreadOf(w.statementsPerUnit, 1)} / ${spreadOf(w.commitsPerUnit, 1)} |`,
      );
    }
  }
  for (const [name, part] of [
    ['core', r.core],
    ['workers', r.workers],
  ] as const) {
    if (!part) continue;
    out.push('', `| ${name} figure | unit | median (min–max) |`, '|---|---|---|');
    for (const f of part.figures)
      out.push(`| ${f.label.trim()} | ${f.unit} | ${spreadOf(f, f.unit === 'ms' ? 3 : 1)} |`);
    for (const q of part.ratios ?? []) out.push(`| ${q.label.trim()} | × | ${spreadOf(q, 2)} |`);
  }
  if (r.scale) {
    out.push(
      '',
      '| terminal runs | due claim p50 ms | empty claim p50 ms | buffers per claim (due / empty) |',
      '|---|---|---|---|',
    );
    for (const z of r.scale.sizes) {
      out.push(
        `| ${z.terminalRuns.toLocaleString('en')} | ${spreadOf(z.due.p50, 3)} | ${spreadOf(z.empty.p50, 3)} | ${z.buffersDue} / ${z.buffersEmpty} |`,
      );
    }
  }
  if (r.transport) {
    const t = r.transport;
    const f = (key: string) => t.figures.find((x: any) => x.key === key);
    const q = (key: string) => t.ratios.find((x: any) => x.key === key);
    out.push(
      '',
      '| transport workload | req/s plain / off / outside / gated | gated / plain | gated / off | outside / plain | gate alone, µs |',
      '|---|---|---|---|---|---|',
    );
    for (const [key, label] of [
      ['fetch.seq', 'fetch, sequential'],
      ['fetch.c16', 'fetch, 16 in flight'],
      ['http.seq', 'node:http, sequential'],
      ['http.c16', 'node:http, 16 in flight'],
      ['socket.seq', 'socket.write x64, sequential'],
      ['pg.seq', 'pg select 1, sequential'],
    ]) {
      const rps = ['plain', 'off', 'outside', 'gated'].map((v) => num(f(`${key}.${v}.perSecond`)?.median, 0));
      const alone = key.endsWith('.seq') ? spreadOf(f(`${key.split('.')[0]}.paired.deltaUs`), 1) : '';
      out.push(
        `| ${label} | ${rps.join(' / ')} | ${spreadOf(q(`${key}.gatedOverPlain`), 3)} | ` +
          `${spreadOf(q(`${key}.gatedOverOff`), 3)} | ${spreadOf(q(`${key}.outsideOverPlain`), 3)} | ${alone} |`,
      );
    }
  }
  return `${out.join('\n')}\n`;
}

async function main(): Promise<void> {
  const { mode, parts, out } = parseArgs(process.argv.slice(2));
  const started = Date.now();
  // Install the peers first, so that a missing registry fails the run before anything is measured.
  const versions = parts.includes('peers') ? ensurePeersInstalled() : {};
  const results: Results = {};
  const loadBefore: Record<string, number> = {};
  for (const part of parts) {
    loadBefore[part] = Number(loadavg()[0].toFixed(2));
    log(`\n=== bench part '${part}' (${SCRIPT[part]}), load ${loadBefore[part]} ===`);
    results[part] = await runPart(part, mode);
  }
  const meta = {
    date: new Date().toISOString(),
    mode,
    parts,
    durationSeconds: Math.round((Date.now() - started) / 1000),
    node: process.version,
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model,
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    postgres: results.core?.meta?.postgres ?? results.workers?.meta?.postgres,
    peerVersions: versions,
    loadAverageBeforeEachPart: loadBefore,
  };
  const rows = headline(results);
  printHeadline(rows, meta);
  writeFileSync(out, `${JSON.stringify({ meta, headline: rows, ...results }, null, 2)}\n`);
  writeFileSync(out.replace(/\.json$/, '') + '.md', markdown(rows, results, meta));
  log(`\nresults written to ${out} (${meta.durationSeconds} s)`);
}

if (require.main === module) {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
