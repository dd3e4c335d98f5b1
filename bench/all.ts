import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { log, type BenchMode } from './cli';
import { BUILD_ENV, compileAll } from './compile';
import { headline, type Headline, num as headNum, printHeadline } from './headline';
import { ensurePeersInstalled } from './peer-runs';

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

/**
 * Parts with no figure among the headline's targets, left out of a `--quick` run unless `--parts` names
 * them: they cost minutes and inform no target. `--smoke` and the full run keep them, so they do not rot.
 */
const NOT_IN_QUICK: Part[] = ['processes', 'history'];

const USAGE = `usage: npm run bench -- [--quick | --smoke] [--parts core,peers,workers,scale,limits,transport,processes,history,boot] [--out FILE]
  --smoke      every part with tiny workloads (~3 minutes; .ci/run does this so that no part rots)
  --quick      every target of the headline with its spread (about 5 minutes on 2 quiet cores, at most
               10): each part with its --quick workloads; ${NOT_IN_QUICK.join(' and ')} (no headline figure) left out
  --parts      run only these parts (their figures only; the headline shows '-' for the rest)
  --out FILE   the combined JSON results (default bench/results.json; Markdown tables beside it, .md)
  DATABASE_URL admin connection (default postgres://root@127.0.0.1:5432/postgres)
Each part also runs alone: npm run bench:core | bench:peers | bench:workers | bench:scale | bench:limits,
  bench:processes (worker pods, direct and through PgBouncer) | bench:history (partitioned events),
  bench:boot (a worker process's start to its first claim, against a plain Nest app's),
  node -r ts-node/register/transpile-only bench/transport.ts`;

function parseArgs(argv: string[]): { mode: BenchMode; parts: Part[]; out: string } {
  let mode: BenchMode = 'full';
  let parts: Part[] | undefined;
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
  parts ??= PARTS.filter((p) => mode !== 'quick' || !NOT_IN_QUICK.includes(p));
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

type Results = Partial<Record<Part, any>>;

/** The headline and the peers as Markdown tables (for docs/PERFORMANCE.md). */
function markdown(rows: Headline[], r: Results, meta: Record<string, unknown>): string {
  const num = (v: number, d = 2) => (Number.isFinite(v) ? v.toFixed(d) : '-');
  const spreadOf = (x: any, d: number) =>
    x && Number.isFinite(x.median) ? `${num(x.median, d)} (${num(x.min, d)}–${num(x.max, d)})` : '-';
  const cell = (h: Headline) => {
    const s = h.spread;
    const f = (v: number) => headNum(v, h.unit);
    return s
      ? `${f(s.q1)}–${f(s.q3)} | ${f(s.min)}–${f(s.max)} | ${s.n} ${s.per}${s.n === 1 ? '' : 's'}`
      : ' | | ';
  };
  const out = [
    `Run of ${meta.date} (${meta.mode}, ${meta.durationSeconds} s), ${meta.cpus} × ${meta.cpuModel}, ` +
      `${meta.memoryGiB} GiB, node ${meta.node}, ${String(meta.postgres ?? '').split(' on ')[0]}.`,
    '',
    '| figure | value | target | verdict | IQR | min–max | n |',
    '|---|---|---|---|---|---|---|',
    ...rows.map(
      (h) =>
        `| ${h.issue47 ? '**' : ''}${h.label.trim()}${h.issue47 ? '**' : ''} | ${headNum(h.value, h.unit)} ${h.unit === 'x' ? '×' : h.unit} | ` +
        `${h.target ? `${h.target.op} ${h.target.value}` : ''} | ${h.verdict ?? ''} | ${cell(h)} |`,
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
  const versions = parts.includes('peers') || parts.includes('workers') ? ensurePeersInstalled() : {};
  // The processes the parts fork run compiled JavaScript: compiled once here for all of them.
  if (parts.some((p) => ['peers', 'workers', 'boot'].includes(p))) {
    const t0 = Date.now();
    process.env[BUILD_ENV] = compileAll();
    log(`compiled the bench's child processes in ${Math.round((Date.now() - t0) / 1000)} s`);
  }
  const results: Results = {};
  const loadBefore: Record<string, number> = {};
  const seconds: Record<string, number> = {};
  for (const part of parts) {
    loadBefore[part] = Number(loadavg()[0].toFixed(2));
    log(
      `\n=== bench part '${part}' (${SCRIPT[part]}), load ${loadBefore[part]}, ` +
        `+${Math.round((Date.now() - started) / 1000)} s ===`,
    );
    const t0 = Date.now();
    results[part] = await runPart(part, mode);
    seconds[part] = Math.round((Date.now() - t0) / 1000);
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
    secondsPerPart: seconds,
  };
  const rows = headline(results);
  printHeadline(rows, meta);
  log(
    `\nseconds per part: ${Object.entries(seconds)
      .map(([p, sec]) => `${p} ${sec}`)
      .join(', ')}; load average before each: ${Object.values(loadBefore).join(', ')}`,
  );
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
