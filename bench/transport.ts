import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import http from 'node:http';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import { join } from 'node:path';
import { Client as PgClient } from 'pg';
import type { RunFrame } from '../src/engine/run-storage';
import { adminUrl, log, parseBenchArgs, rotate, runMeta } from './cli';
import { quantile, spread, type Spread } from './stats';

/**
 * `node -r ts-node/register/transpile-only bench/transport.ts [--quick | --smoke] [--repeat N] [--out FILE]`
 * (or `npm run bench -- --parts transport`). The fenced transport's cost per request (issue 34):
 * requests to a loopback HTTP/1.1 server (keep-alive, its own process) with the global `fetch`
 * (undici) and with `node:http` (a keep-alive Agent), sequential and 16 in flight; and, since issue 44,
 * its cost per socket write (`socket`: bursts of WRITE_BURST writes of 64 bytes on one loopback `net`
 * socket to a sink, the socket check) and per pg query (`pg`: `select 1` on one pg.Client to
 * DATABASE_URL's server, the query check; left out when no server answers). In four variants, each
 * measured in a client process of its own (all forked alike from this file, all doing the same work in
 * the same rhythm):
 *
 * - plain:   nothing installed (the baseline);
 * - off:     nothing installed, each request in a call frame without a gate: `gated(frame)` as the
 *            engine runs a body with `worker.fencedTransport: false`;
 * - outside: after `installFencedTransport()`, requests outside any call (the hooks' cost for requests
 *            outside runs);
 * - gated:   installed, each request in a gated call with a fresh `WireGate`, as the engine runs a
 *            command or step body with the transport on: the check at the socket write.
 *
 * Installing is process-global and cannot be undone, hence the processes. The variants alternate in
 * short blocks, in an order that rotates from workload to workload and repeat to repeat, and every
 * ratio is computed per repeat from neighbouring blocks, then the median. The client processes are
 * replaced by fresh ones a few times over the run ("generations"): one process can be a few per cent
 * faster than another for its whole life (JIT, where the scheduler puts it), which blocks do not cancel.
 * A fifth process (installed) alternates single sequential requests between a gated call and a call
 * without a gate: the gate's own cost, read where the block-to-block noise is larger than it.
 */

type Client = 'fetch' | 'http' | 'socket' | 'pg';
type Shape = 'seq' | 'c16';
/** Writes per `socket` op: one write is well under a microsecond, a burst of them can be timed. */
const WRITE_BURST = 64;
const CHUNK = Buffer.alloc(64, 'x');
const CLIENTS: Client[] = ['fetch', 'http', 'socket', 'pg'];
const CLIENT_LABEL: Record<Client, string> = {
  fetch: 'fetch',
  http: 'node:http',
  socket: `socket.write x${WRITE_BURST}`,
  pg: 'pg query',
};
const VARIANTS = ['plain', 'off', 'outside', 'gated'] as const;
type Variant = (typeof VARIANTS)[number];
/** The client processes: one per variant, and one (installed) for the alternating measurement. */
type Role = Variant | 'paired';
const ROLES: Role[] = [...VARIANTS, 'paired'];
const WORKLOADS: Array<{ key: string; client: Client; shape: Shape; label: string }> = [
  { key: 'fetch.seq', client: 'fetch', shape: 'seq', label: 'fetch, sequential' },
  { key: 'fetch.c16', client: 'fetch', shape: 'c16', label: 'fetch, 16 in flight' },
  { key: 'http.seq', client: 'http', shape: 'seq', label: 'node:http, sequential' },
  { key: 'http.c16', client: 'http', shape: 'c16', label: 'node:http, 16 in flight' },
  { key: 'socket.seq', client: 'socket', shape: 'seq', label: `socket.write x${WRITE_BURST}, sequential` },
  { key: 'pg.seq', client: 'pg', shape: 'seq', label: 'pg select 1, sequential' },
];
/** Where each client sends: the HTTP server, the sink's port, the database. */
type Targets = Record<Client, string>;
const IN_FLIGHT = 16;

interface TransportConfig {
  /** Repeats in all, spread over the generations. */
  repeat: number;
  /** Sets of fresh client processes, one after the other. */
  generations: number;
  /** Requests per block, sequential (and pairs per repeat of the alternating measurement). */
  seq: number;
  /** Requests per block, 16 in flight. */
  c16: number;
  /** Requests per untimed warm-up block (per workload and variant, in every generation). */
  warmup: number;
  /** Only these workloads (keys, e.g. 'fetch.seq'; all when absent), and the gate-alone pairs of none. */
  only?: string[];
}

/**
 * Short blocks, many repeats: each ratio compares blocks a fraction of a second apart, so a burst of
 * load from elsewhere on the machine hits the variants it compares alike, and the median drops it.
 */
const FULL: TransportConfig = { repeat: 40, generations: 4, seq: 200, c16: 400, warmup: 1000 };
/**
 * `--quick`: the headline's workload only (sequential fetch), in twice as many repeats: the other
 * workloads and the gate alone (no target of the headline) are left to the full run.
 */
const QUICK: TransportConfig = {
  repeat: 32,
  generations: 2,
  seq: 300,
  c16: 300,
  warmup: 600,
  only: ['fetch.seq'],
};
/** `--smoke` (CI): proves the part runs, measures nothing worth reading. */
const SMOKE: TransportConfig = { repeat: 2, generations: 1, seq: 50, c16: 100, warmup: 100 };

const USAGE = `usage: node -r ts-node/register/transpile-only bench/transport.ts [--quick | --smoke] [--repeat N] [--out FILE]
  --smoke      seconds: tiny blocks (CI checks that the part still runs)
  --quick      sequential fetch only, 32 repeats of 300 requests in 2 generations of client processes
               (~25 s; default: every workload and the gate alone, 40 repeats of 200 in 4, ~2 minutes)
  --repeat N   repeats in all (N >= 2)
  --out FILE   where to write the JSON results (default bench/transport-results.json)
No database. Also: npm run bench -- --parts transport`;

/** One block of one variant: `n` requests. */
interface Block {
  n: number;
  perSecond: number;
  p50Us: number;
  p99Us: number;
  /** CPU time (user + system) of the client process per request. */
  cpuUs: number;
  /** Client CPU time / wall time: near 1, the client was the bottleneck (not the server). */
  cpuBusy: number;
}

/** Sequential requests alternating between a gated call and a call without a gate: the p50 of each. */
interface Paired {
  gatedP50Us: number;
  ungatedP50Us: number;
}

type Wrap = (body: () => Promise<void>) => Promise<void>;
const direct: Wrap = (body) => body();

const senders = new Map<Client, () => Promise<void>>();
/** One sender per client and process, so the keep-alive connections live across the blocks. */
function sender(client: Client, url: string): () => Promise<void> {
  let send = senders.get(client);
  if (send) return send;
  if (client === 'socket') {
    let socket: Promise<Socket> | undefined;
    send = async () => {
      const s = await (socket ??= new Promise<Socket>((resolve, reject) => {
        const c = connect(Number(url), '127.0.0.1', () => resolve(c)).on('error', reject);
        c.setNoDelay(true);
      }));
      for (let i = 0; i < WRITE_BURST; i++) s.write(CHUNK);
      if (s.writableNeedDrain) await once(s, 'drain');
    };
  } else if (client === 'pg') {
    let pg: Promise<PgClient> | undefined;
    send = async () => {
      const c = await (pg ??= (async () => {
        const c = new PgClient({ connectionString: url });
        await c.connect();
        return c;
      })());
      await c.query('select 1');
    };
  } else if (client === 'fetch') {
    send = async () => {
      const res = await fetch(url);
      await res.arrayBuffer();
    };
  } else {
    const agent = new http.Agent({ keepAlive: true });
    send = () =>
      new Promise<void>((resolve, reject) => {
        const req = http.get(url, { agent }, (res) => {
          res.on('error', reject);
          res.on('end', resolve);
          res.resume();
        });
        req.on('error', reject);
      });
  }
  senders.set(client, send);
  return send;
}

/**
 * `n` requests, one after the other or by 16 concurrent loops; each timed around `wrap`, after a
 * lead-in of untimed requests: the process sat idle while the others ran, its caches are cold.
 */
async function runBlock(client: Client, shape: Shape, n: number, url: string, wrap: Wrap): Promise<Block> {
  const send = sender(client, url);
  const loops = shape === 'seq' ? 1 : IN_FLIGHT;
  const leadIn = Math.max(2 * loops, Math.round(n / 10));
  for (let i = 0; i < leadIn; i += loops) await Promise.all(Array.from({ length: loops }, () => wrap(send)));
  const ms: number[] = new Array(n);
  let next = 0;
  const loop = async () => {
    while (next < n) {
      const i = next++;
      const t = performance.now();
      await wrap(send);
      ms[i] = performance.now() - t;
    }
  };
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(Array.from({ length: loops }, loop));
  const wallMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const cpuMs = (cpu.user + cpu.system) / 1000;
  ms.sort((a, b) => a - b);
  return {
    n,
    perSecond: n / (wallMs / 1000),
    p50Us: quantile(ms, 0.5) * 1000,
    p99Us: quantile(ms, 0.99) * 1000,
    cpuUs: (cpuMs * 1000) / n,
    cpuBusy: cpuMs / wallMs,
  };
}

/**
 * `n` pairs of sequential requests, alternating one by one (G U U G G U U G ...) between a gated call
 * and a call without a gate: both see the same machine at the same moment, so the difference of their
 * p50s is the gate's own cost even when the block-to-block noise is larger than it.
 */
async function pairedBlock(client: Client, n: number, url: string, g: Wrap, u: Wrap): Promise<Paired> {
  const send = sender(client, url);
  const gatedMs: number[] = [];
  const ungatedMs: number[] = [];
  for (let i = 0; i < 2 * n; i++) {
    const gatedTurn = i % 4 === 0 || i % 4 === 3;
    const t = performance.now();
    await (gatedTurn ? g : u)(send);
    (gatedTurn ? gatedMs : ungatedMs).push(performance.now() - t);
  }
  const p50Us = (ms: number[]) =>
    quantile(
      [...ms].sort((a, b) => a - b),
      0.5,
    ) * 1000;
  return { gatedP50Us: p50Us(gatedMs), ungatedP50Us: p50Us(ungatedMs) };
}

type Ask =
  | { kind: 'block'; variant: Variant; client: Client; shape: Shape; n: number; url: string }
  | { kind: 'paired'; client: Client; n: number; url: string };
/** `checks`: wire checks the gates made during the ask; `gatedCalls`: gated calls it made (requests). */
type Answer = { block?: Block; paired?: Paired; checks: number; gatedCalls: number; error?: string };

/**
 * A client process: measures its one variant (or, `paired`, alternates gated and ungated calls) when
 * the parent asks, one ask at a time. The variants' processes all do the same work in the same rhythm:
 * a process that is busier than another runs faster on a shared machine, JIT and installation aside.
 */
async function clientProcess(role: Role): Promise<void> {
  let checks = 0;
  let gatedCalls = 0;
  let wrap: Wrap = direct;
  let ungated: Wrap = direct;
  if (role !== 'plain') {
    const { gated, WireGate } = await import('../src/engine/wire/wire-gate');
    ungated = (body) => gated({} as RunFrame, body);
    if (role === 'off') wrap = ungated;
    else {
      const { installFencedTransport } = await import('../src/engine/wire/fenced-transport');
      installFencedTransport();
      const check = (): undefined => void checks++;
      if (role !== 'outside') {
        wrap = (body) => {
          gatedCalls++;
          return gated({ gate: new WireGate(check, 'bench') } as unknown as RunFrame, body);
        };
      }
    }
  }
  process.on('message', (ask: Ask) => {
    const [checksBefore, callsBefore] = [checks, gatedCalls];
    let work: Promise<Pick<Answer, 'block' | 'paired'>>;
    if ((ask.kind === 'paired' ? 'paired' : ask.variant) !== role) {
      work = Promise.reject(new Error(`the ${role} client process cannot measure that`));
    } else if (ask.kind === 'paired') {
      work = pairedBlock(ask.client, ask.n, ask.url, wrap, ungated).then((paired) => ({ paired }));
    } else {
      work = runBlock(ask.client, ask.shape, ask.n, ask.url, wrap).then((block) => ({ block }));
    }
    const counts = () => ({ checks: checks - checksBefore, gatedCalls: gatedCalls - callsBefore });
    work.then(
      (a) => process.send!({ ...a, ...counts() }),
      (err: Error) => process.send!({ error: String(err?.stack ?? err), ...counts() }),
    );
  });
  process.send!({ ready: true });
}

/**
 * A minimal HTTP/1.1 server on `net`: one canned keep-alive response per request head (the clients
 * send GETs without a body). Much cheaper per request than `http.createServer`, so that the client,
 * whose cost is measured, is the bottleneck.
 */
function serve(): void {
  const response = Buffer.from(
    'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\nKeep-Alive: timeout=600\r\n\r\nok',
  );
  const server = createServer((socket) => {
    socket.setNoDelay(true);
    let tail = '';
    socket.on('data', (chunk) => {
      const text = tail + chunk.toString('latin1');
      let at = 0;
      for (let end = text.indexOf('\r\n\r\n'); end !== -1; end = text.indexOf('\r\n\r\n', at)) {
        socket.write(response);
        at = end + 4;
      }
      tail = text.slice(at);
    });
    socket.on('error', () => undefined);
  });
  // A sink for the socket writes: reads and drops.
  const sink = createServer((socket) => {
    socket.on('data', () => undefined);
    socket.on('error', () => undefined);
  });
  const port = (s: typeof server) => (s.address() as AddressInfo).port;
  server.listen(0, '127.0.0.1', () =>
    sink.listen(0, '127.0.0.1', () => process.send!({ port: port(server), sinkPort: port(sink) })),
  );
}

/** The database server the pg workload queries, if one answers. */
async function pgTarget(): Promise<string | undefined> {
  const url = adminUrl();
  const c = new PgClient({ connectionString: url, connectionTimeoutMillis: 2000 });
  try {
    await c.connect();
    await c.query('select 1');
    return url;
  } catch (err) {
    log(`  no PostgreSQL at ${url} (${(err as Error).message}): the pg workload is left out`);
    return undefined;
  } finally {
    await c.end().catch(() => undefined);
  }
}

function spawnChild(role: Role | 'server'): ChildProcess {
  return fork(__filename, ['--child', role], {
    execArgv: ['-r', 'ts-node/register/transpile-only'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
}

/** The child's next message, or an error if it exits first. */
function nextMessage<T>(c: ChildProcess): Promise<T> {
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null) => reject(new Error(`bench child exited with ${code}`));
    c.once('exit', onExit);
    c.once('message', (m) => {
      c.removeListener('exit', onExit);
      resolve(m as T);
    });
  });
}

async function ask(c: ChildProcess, a: Ask): Promise<Answer> {
  const answer = nextMessage<Answer>(c);
  c.send(a);
  const got = await answer;
  if (got.error) throw new Error(`bench child: ${got.error}`);
  return got;
}

/** A per-repeat value derived from the blocks of one workload: a ratio or a difference. */
interface Derived {
  key: string;
  label: string;
  unit: 'x' | 'µs';
  of: (b: Record<Variant, Block>) => number;
  target?: { op: '<=' | '>='; value: number };
  /** Only for sequential requests (at 16 in flight, p50 is mostly the wait for the other 15). */
  seqOnly?: boolean;
  /** Only for these clients (default: all). */
  clients?: Client[];
}

/** HTTP requests are held to the target; socket writes and pg queries are reported (issue 44). */
const TARGETED: Client[] = ['fetch', 'http'];

const DERIVED: Derived[] = [
  {
    key: 'gatedOverPlain',
    label: 'req/s, gated call / plain',
    unit: 'x',
    of: (b) => b.gated.perSecond / b.plain.perSecond,
    target: { op: '>=', value: 0.95 },
  },
  {
    key: 'gatedOverOff',
    label: 'req/s, gated call / call without the transport',
    unit: 'x',
    of: (b) => b.gated.perSecond / b.off.perSecond,
  },
  {
    key: 'outsideOverPlain',
    label: 'req/s, installed, outside a call / plain',
    unit: 'x',
    of: (b) => b.outside.perSecond / b.plain.perSecond,
  },
  {
    key: 'offOverPlain',
    label: 'req/s, call without the transport / plain',
    unit: 'x',
    of: (b) => b.off.perSecond / b.plain.perSecond,
  },
  {
    key: 'p50DeltaUs',
    label: 'p50, gated call - plain',
    unit: 'µs',
    of: (b) => b.gated.p50Us - b.plain.p50Us,
    seqOnly: true,
  },
  {
    key: 'p50DeltaOffUs',
    label: 'p50, gated call - call without the transport',
    unit: 'µs',
    of: (b) => b.gated.p50Us - b.off.p50Us,
    seqOnly: true,
  },
  {
    key: 'usPerRequest',
    label: 'time per request (1 / req/s), gated call - plain',
    unit: 'µs',
    of: (b) => 1e6 / b.gated.perSecond - 1e6 / b.plain.perSecond,
  },
  {
    key: 'usPerRequestOff',
    label: 'time per request, gated call - call without the transport',
    unit: 'µs',
    of: (b) => 1e6 / b.gated.perSecond - 1e6 / b.off.perSecond,
  },
  {
    key: 'cpuDeltaUs',
    label: 'client CPU per request, gated call - plain',
    unit: 'µs',
    of: (b) => b.gated.cpuUs - b.plain.cpuUs,
  },
  {
    key: 'usPerWrite',
    label: 'time per socket.write, gated call - plain',
    unit: 'µs',
    of: (b) => (1e6 / b.gated.perSecond - 1e6 / b.plain.perSecond) / WRITE_BURST,
    clients: ['socket'],
  },
  {
    key: 'usPerWriteOutside',
    label: 'time per socket.write, installed, outside a call - plain',
    unit: 'µs',
    of: (b) => (1e6 / b.outside.perSecond - 1e6 / b.plain.perSecond) / WRITE_BURST,
    clients: ['socket'],
  },
  {
    key: 'cpuPerWriteUs',
    label: 'client CPU per socket.write, gated call - plain',
    unit: 'µs',
    of: (b) => (b.gated.cpuUs - b.plain.cpuUs) / WRITE_BURST,
    clients: ['socket'],
  },
];

const derivedOf = (wl: { client: Client; shape: Shape }): Derived[] =>
  DERIVED.filter(
    (d) => (wl.shape === 'seq' || !d.seqOnly) && (!d.clients || d.clients.includes(wl.client)),
  ).map((d) => (TARGETED.includes(wl.client) ? d : { ...d, target: undefined }));

type Figure = Spread & { key: string; label: string; unit: string };
type Ratio = Figure & { target?: Derived['target']; meetsTarget?: boolean };
interface Check {
  label: string;
  requests: number;
  checks: number;
  ok: boolean;
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
    join(__dirname, 'transport-results.json'),
  );
  const started = Date.now();
  const generations = Math.min(cfg.generations, cfg.repeat);
  const children = new Set<ChildProcess>();
  const start = (role: Role | 'server') => {
    const c = spawnChild(role);
    children.add(c);
    c.once('exit', () => children.delete(c));
    return c;
  };
  let checks = 0;
  let gatedRequests = 0;
  const blocks: Array<Record<string, Record<Variant, Block>>> = [];
  const pairs: Array<Record<Client, Paired>> = [];
  const pgUrl = await pgTarget();
  const workloads = WORKLOADS.filter(
    (w) => (w.client !== 'pg' || pgUrl) && (!cfg.only || cfg.only.includes(w.key)),
  );
  // The gate alone, per client (not with `only`).
  const clients = cfg.only ? [] : CLIENTS.filter((c) => c !== 'pg' || pgUrl);
  try {
    const server = start('server');
    const { port, sinkPort } = await nextMessage<{ port: number; sinkPort: number }>(server);
    const url = `http://127.0.0.1:${port}/`;
    const targets: Targets = { fetch: url, http: url, socket: String(sinkPort), pg: pgUrl ?? '' };
    for (let gen = 0, r = 0; gen < generations; gen++) {
      const procs = Object.fromEntries(ROLES.map((role) => [role, start(role)])) as Record<
        Role,
        ChildProcess
      >;
      await Promise.all(Object.values(procs).map((c) => nextMessage(c)));
      const measure = async (v: Variant, client: Client, shape: Shape, n: number): Promise<Block> => {
        const a = await ask(procs[v], { kind: 'block', variant: v, client, shape, n, url: targets[client] });
        checks += a.checks;
        gatedRequests += a.gatedCalls;
        return a.block!;
      };
      const paired = async (client: Client, n: number): Promise<Paired> => {
        const a = await ask(procs.paired, { kind: 'paired', client, n, url: targets[client] });
        checks += a.checks;
        gatedRequests += a.gatedCalls;
        return a.paired!;
      };
      log(`  generation ${gen + 1}/${generations}: warm-up, ${cfg.warmup} requests per workload and variant`);
      for (const [w, wl] of workloads.entries()) {
        for (const v of rotate([...VARIANTS], w)) await measure(v, wl.client, wl.shape, cfg.warmup);
      }
      for (const client of clients) await paired(client, cfg.warmup);
      const until = Math.round((cfg.repeat * (gen + 1)) / generations);
      for (; r < until; r++) {
        log(`  [${r + 1}/${cfg.repeat}] ${workloads.map((w) => w.key).join(', ')}; alternating`);
        const repeat: Record<string, Record<Variant, Block>> = {};
        for (const [w, wl] of workloads.entries()) {
          const got = {} as Record<Variant, Block>;
          const n = wl.shape === 'seq' ? cfg.seq : cfg.c16;
          for (const v of rotate([...VARIANTS], r + w)) got[v] = await measure(v, wl.client, wl.shape, n);
          repeat[wl.key] = got;
        }
        blocks.push(repeat);
        const pair = {} as Record<Client, Paired>;
        for (const client of rotate(clients, r)) pair[client] = await paired(client, cfg.seq);
        pairs.push(pair);
      }
      for (const c of Object.values(procs)) c.kill();
    }
  } finally {
    for (const c of children) c.kill();
  }

  const figures: Figure[] = [];
  const ratios: Ratio[] = [];
  for (const wl of workloads) {
    for (const v of VARIANTS) {
      const per = (f: keyof Block) => spread(blocks.map((b) => b[wl.key][v][f]));
      const at = `${wl.key}.${v}`;
      const label = `${wl.label}, ${v}`;
      figures.push(
        { key: `${at}.perSecond`, label: `${label}, req/s`, unit: 'req/s', ...per('perSecond') },
        { key: `${at}.p50`, label: `${label}, p50`, unit: 'µs', ...per('p50Us') },
        { key: `${at}.cpu`, label: `${label}, client CPU per request`, unit: 'µs', ...per('cpuUs') },
        { key: `${at}.cpuBusy`, label: `${label}, client CPU / wall`, unit: 'x', ...per('cpuBusy') },
      );
    }
    for (const d of derivedOf(wl)) {
      const s = spread(blocks.map((b) => d.of(b[wl.key])));
      const row = { key: `${wl.key}.${d.key}`, label: `${wl.label}: ${d.label}`, unit: d.unit, ...s };
      if (d.unit === 'µs') figures.push(row);
      else {
        const meetsTarget = d.target
          ? d.target.op === '>='
            ? s.median >= d.target.value
            : s.median <= d.target.value
          : undefined;
        ratios.push({ ...row, target: d.target, meetsTarget });
      }
    }
  }
  for (const client of clients) {
    const label = `${CLIENT_LABEL[client]}, sequential, alternating in one process`;
    const of = (f: (p: Paired) => number) => spread(pairs.map((p) => f(p[client])));
    figures.push(
      {
        key: `${client}.paired.gated.p50`,
        label: `${label}: gated call, p50`,
        unit: 'µs',
        ...of((p) => p.gatedP50Us),
      },
      {
        key: `${client}.paired.ungated.p50`,
        label: `${label}: call without a gate, p50`,
        unit: 'µs',
        ...of((p) => p.ungatedP50Us),
      },
      {
        key: `${client}.paired.deltaUs`,
        label: `${label}: p50, gated call - call without a gate`,
        unit: 'µs',
        ...of((p) => p.gatedP50Us - p.ungatedP50Us),
      },
    );
  }
  const summary = {
    meta: {
      ...runMeta(started, mode),
      repeats: cfg.repeat,
      generations,
      undici: process.versions.undici,
    },
    config: { ...cfg, inFlight: IN_FLIGHT, variants: VARIANTS },
    figures,
    ratios,
    checks: [
      {
        label: 'every request in a gated call passed the wire check',
        requests: gatedRequests,
        checks,
        ok: gatedRequests > 0 && checks >= gatedRequests,
      },
    ] as Check[],
    blocks,
    pairs,
  };
  print(summary, cfg, workloads, clients);
  writeFileSync(out, `${JSON.stringify(summary, null, 2)}\n`);
  log(`results written to ${out} (${Math.round((Date.now() - started) / 1000)} s)`);
  if (!summary.checks[0].ok) {
    throw new Error(`the wire check ran ${checks} times for ${gatedRequests} gated requests`);
  }
}

function print(
  s: { meta: Record<string, unknown>; figures: Figure[]; ratios: Ratio[]; checks: Check[] },
  cfg: TransportConfig,
  workloads: typeof WORKLOADS,
  clients: Client[],
): void {
  const m = (key: string) => s.figures.find((f) => f.key === key)?.median ?? NaN;
  const n0 = (v: number) => (Number.isFinite(v) ? v.toFixed(0) : '-');
  const f = (x: Spread, d: number) =>
    `${x.median.toFixed(d)} (${x.min.toFixed(d)} to ${x.max.toFixed(d)})`.padEnd(26);
  console.log(
    `\nFenced transport, cost per request (${s.meta.mode}, ${cfg.repeat} repeats in ${s.meta.generations} ` +
      `generations of client processes; blocks of ${cfg.seq} sequential / ${cfg.c16} @16 requests;\n` +
      `loopback HTTP/1.1, keep-alive; node ${s.meta.node}, undici ${s.meta.undici}, ${s.meta.cpus} CPUs)\n` +
      `plain: nothing installed; off: in a call frame, transport not installed; outside: installed, no call;\n` +
      `gated: in a gated call, a fresh WireGate per request. A socket request is a burst of ${WRITE_BURST} writes\n` +
      `of 64 bytes to a loopback sink; a pg request, select 1. Medians over the repeats.`,
  );
  console.log(`\n${''.padEnd(38)}${VARIANTS.map((v) => v.padStart(9)).join('')}`);
  for (const wl of workloads) {
    for (const [fig, unit] of [
      ['perSecond', 'req/s'],
      ['p50', 'p50 µs'],
      ['cpu', 'CPU µs/req'],
    ]) {
      const row = VARIANTS.map((v) => n0(m(`${wl.key}.${v}.${fig}`)).padStart(9)).join('');
      console.log(`${(fig === 'perSecond' ? wl.label : '').padEnd(26)}${unit.padEnd(12)}${row}`);
    }
  }
  console.log(`\nPer repeat (neighbouring blocks), then median (min to max) over the repeats`);
  for (const wl of workloads) {
    console.log(wl.label);
    for (const d of derivedOf(wl)) {
      const key = `${wl.key}.${d.key}`;
      const r = s.ratios.find((q) => q.key === key);
      const x = r ?? s.figures.find((q) => q.key === key)!;
      const verdict = r?.target
        ? `${r.target.op} ${r.target.value}  ${r.meetsTarget ? 'met' : 'MISSED'}`
        : '';
      console.log(`  ${d.label.padEnd(58)} ${f(x, d.unit === 'x' ? 3 : 1)} ${d.unit.padEnd(3)} ${verdict}`);
    }
  }
  console.log(
    `\nThe gate alone: sequential requests in one installed process, alternating one by one between a\n` +
      `gated call and a call without a gate (G U U G ...); per repeat, then median (min to max)`,
  );
  for (const client of clients) {
    const x = s.figures.find((q) => q.key === `${client}.paired.deltaUs`)!;
    console.log(
      `  ${`${CLIENT_LABEL[client]}: p50, gated call - call without a gate`.padEnd(58)} ${f(x, 1)} µs`,
    );
  }
  console.log('\nChecks');
  for (const c of s.checks) {
    console.log(
      `  ${c.label.padEnd(58)} ${c.ok ? 'OK  ' : 'FAIL'} (${c.checks} checks, ${c.requests} requests)`,
    );
  }
}

if (require.main === module) {
  const role = process.argv[2] === '--child' ? process.argv[3] : undefined;
  const run =
    role === 'server'
      ? Promise.resolve(serve())
      : ROLES.includes(role as Role)
        ? clientProcess(role as Role)
        : role
          ? Promise.reject(new Error(`unknown child role ${role}`))
          : main();
  if (role) process.on('disconnect', () => process.exit(0));
  run.catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
