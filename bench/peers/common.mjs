// Shared helpers of the peer runners (bench/peers/*.mjs): argument parsing, stdout discipline, percentile
// statistics, statement and commit counting, the database's xact_commit counter, and the one JSON line.
// Plain JavaScript on purpose: the root `npm run lint` type-checks bench/**/*.ts without bench/node_modules.

import { AsyncLocalStorage } from 'node:async_hooks';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';

/** The real stdout writer; everything else written to stdout is sent to stderr (see {@link guardStdout}). */
const writeStdout = process.stdout.write.bind(process.stdout);

/**
 * Sends every later write to stdout to stderr instead, so that the result line printed by {@link emit} is
 * the only line on stdout whatever the libraries log. Called when this module loads.
 */
function guardStdout() {
  process.stdout.write = /** @type {typeof process.stdout.write} */ (
    (chunk, encoding, cb) => process.stderr.write(chunk, /** @type {any} */ (encoding), cb)
  );
}
guardStdout();

/** @param {...unknown} args */
export function log(...args) {
  console.error(`[${new Date().toISOString().slice(11, 23)}]`, ...args);
}

/** @param {number} ms */
export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * @typedef {object} WorkloadDefaults
 * @property {number} n            units timed (steps, workflows or jobs)
 * @property {number} concurrency  units in flight (or workers)
 * @property {number} warmup       untimed units before the timed window
 */

/**
 * @typedef {object} Cli
 * @property {string} url           connection string of the (empty) database to use
 * @property {string} adminUrl      connection string of another database on the same server (pg_stat_database reads)
 * @property {string} database      database name from `url`
 * @property {string} workload
 * @property {number} n
 * @property {number} concurrency
 * @property {number} warmup
 * @property {number} settleMs      wait before a pg_stat_database reading that must include idle backends' stats
 * @property {number} timeoutS      watchdog: exit 1 if the runner is still going after this long
 * @property {boolean} debugStatements  print the distinct statements of the timed window to stderr
 * @property {boolean} serve        block mode (see {@link serveBlocks}): warm up, then timed blocks on request
 * @property {Record<string, string | boolean | undefined>} extra  peer-specific options
 */

/**
 * Parses `--url URL --workload NAME [--n N] [--concurrency C] [--warmup W]` plus the peer's own options.
 * @param {Record<string, WorkloadDefaults>} workloads  the runner's workloads and their defaults
 * @param {Record<string, {type: 'string' | 'boolean', default?: string | boolean}>} [extraOptions]
 * @returns {Cli}
 */
export function parseCli(workloads, extraOptions = {}) {
  const { values } = parseArgs({
    options: {
      url: { type: 'string' },
      'admin-url': { type: 'string' },
      workload: { type: 'string' },
      n: { type: 'string' },
      concurrency: { type: 'string' },
      warmup: { type: 'string' },
      'settle-ms': { type: 'string', default: '11000' },
      'timeout-s': { type: 'string', default: '240' },
      'debug-statements': { type: 'boolean', default: false },
      serve: { type: 'boolean', default: false },
      ...extraOptions,
    },
    strict: true,
    allowPositionals: false,
  });
  const names = Object.keys(workloads);
  if (!values.url) throw new Error(`--url is required (workloads: ${names.join(', ')})`);
  const workload = /** @type {string} */ (values.workload);
  if (!workload || !workloads[workload]) throw new Error(`--workload must be one of: ${names.join(', ')}`);
  const defaults = workloads[workload];
  const int = (/** @type {unknown} */ v, /** @type {number} */ d, /** @type {string} */ name, min = 1) => {
    if (v === undefined) return d;
    const x = Number(v);
    if (!Number.isInteger(x) || x < min) throw new Error(`--${name} must be an integer >= ${min}`);
    return x;
  };
  const url = new URL(String(values.url));
  const database = decodeURIComponent(url.pathname.replace(/^\//, ''));
  if (!database) throw new Error('--url must name a database');
  let adminUrl = values['admin-url'] ? String(values['admin-url']) : '';
  if (!adminUrl) {
    const admin = new URL(url.href);
    admin.pathname = database === 'postgres' ? '/template1' : '/postgres';
    adminUrl = admin.href;
  }
  /** @type {Record<string, string | boolean | undefined>} */
  const extra = {};
  for (const key of Object.keys(extraOptions)) extra[key] = /** @type {any} */ (values)[key];
  return {
    url: url.href,
    adminUrl,
    database,
    workload,
    n: int(values.n, defaults.n, 'n'),
    concurrency: int(values.concurrency, defaults.concurrency, 'concurrency'),
    warmup: int(values.warmup, defaults.warmup, 'warmup', 0),
    settleMs: int(values['settle-ms'], 11000, 'settle-ms', 0),
    timeoutS: int(values['timeout-s'], 240, 'timeout-s'),
    debugStatements: Boolean(values['debug-statements']),
    serve: Boolean(values.serve),
    extra,
  };
}

/**
 * Version of an installed package, read from bench/node_modules (these packages do not all export
 * their package.json).
 * @param {string} pkg
 * @returns {string}
 */
export function installedVersion(pkg) {
  const file = new URL(`../node_modules/${pkg}/package.json`, import.meta.url);
  return JSON.parse(readFileSync(file, 'utf8')).version;
}

/** Nearest-rank quantile of an ascending array (q in 0..1), as bench/stats.ts computes it. */
/** @param {number[]} sorted @param {number} q */
export function quantile(sorted, q) {
  if (!sorted.length) return NaN;
  const rank = Math.ceil(q * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))];
}

/**
 * p50 / p99 / mean / max of latency samples (milliseconds).
 * @param {number[]} samples
 */
export function latency(samples) {
  const s = [...samples].sort((a, b) => a - b);
  return {
    n: s.length,
    p50: quantile(s, 0.5),
    p99: quantile(s, 0.99),
    mean: s.reduce((a, b) => a + b, 0) / (s.length || 1),
    max: s.length ? s[s.length - 1] : NaN,
  };
}

/** @param {number} x @param {number} [digits] */
export const round = (x, digits = 3) => (Number.isFinite(x) ? Number(x.toFixed(digits)) : null);

/** @typedef {'begin' | 'commit' | 'rollback' | 'other'} TxKind */

/**
 * What a single SQL statement does to the transaction state.
 * @param {string} sql
 * @returns {TxKind}
 */
function txKind(sql) {
  const head = sql.trimStart().slice(0, 24).toUpperCase();
  if (/^(BEGIN|START TRANSACTION)\b/.test(head)) return 'begin';
  if (/^(COMMIT|END)\b/.test(head) && !/^COMMIT PREPARED\b/.test(head)) return 'commit';
  if (/^(ROLLBACK|ABORT)\b/.test(head) && !/^ROLLBACK (TO|PREPARED)\b/.test(head)) return 'rollback';
  return 'other';
}

/**
 * Splits a multi-statement string at its top-level semicolons (quotes, dollar quotes and comments
 * skipped), so that e.g. the `END;` of a plpgsql body in a migration is not taken for a COMMIT.
 * @param {string} sql
 * @returns {string[]}
 */
function splitStatements(sql) {
  const out = [];
  let start = 0;
  let i = 0;
  while (i < sql.length) {
    const ch = sql[i];
    if (ch === "'" || ch === '"') {
      const j = sql.indexOf(ch, i + 1);
      i = j < 0 ? sql.length : j + 1;
    } else if (ch === '-' && sql[i + 1] === '-') {
      const j = sql.indexOf('\n', i);
      i = j < 0 ? sql.length : j + 1;
    } else if (ch === '/' && sql[i + 1] === '*') {
      const j = sql.indexOf('*/', i + 2);
      i = j < 0 ? sql.length : j + 2;
    } else if (ch === '$') {
      const m = /^\$[A-Za-z_0-9]*\$/.exec(sql.slice(i, i + 64));
      if (m) {
        const j = sql.indexOf(m[0], i + m[0].length);
        i = j < 0 ? sql.length : j + m[0].length;
      } else i++;
    } else if (ch === ';') {
      out.push(sql.slice(start, i));
      start = ++i;
    } else i++;
  }
  out.push(sql.slice(start));
  return out.filter((x) => x.trim().length > 0);
}

/**
 * Transactions a statement string commits, given (and updating) its client's explicit-transaction state:
 * COMMIT of an explicit transaction = 1; statements outside one = 1 implicit transaction per string
 * (the simple-query protocol runs a multi-statement string as one implicit transaction).
 * @param {any} client @param {symbol} inTx @param {string} text
 */
function countCommits(client, inTx, text) {
  const pieces = text.includes(';') ? splitStatements(text) : [text];
  let commits = 0;
  let implicit = false;
  for (const piece of pieces) {
    const kind = txKind(piece);
    if (kind === 'begin') client[inTx] = true;
    else if (kind === 'commit') {
      if (client[inTx]) commits++;
      client[inTx] = false;
    } else if (kind === 'rollback') client[inTx] = false;
    else if (!client[inTx]) implicit = true;
  }
  return commits + (implicit ? 1 : 0);
}

/**
 * @typedef {object} CountSnapshot
 * @property {number} statements  statements sent through pg.Client#query
 * @property {number} commits     transactions ended by COMMIT, plus statements sent outside an explicit transaction
 * @property {number} rollbacks
 * @property {number} scoped      statements sent from inside {@link StatementCounter.scope}
 * @property {number} scopedCommits
 * @property {number} marked      statements sent while {@link StatementCounter.mark} was on, from inside a scope
 * @property {number} markedCommits
 */

/**
 * Counts the statements every pg.Client of this process sends, by wrapping `Client.prototype.query` of the
 * given `pg` module (the same instance the peer library loads: bench/node_modules/pg, deduplicated). Also
 * classifies transactions client-side: an explicit BEGIN ... COMMIT is one commit, and a statement sent
 * outside an explicit transaction is one autocommit transaction; this is checked against the server's
 * pg_stat_database.xact_commit by the runners. `scope(fn)` tags what `fn` sends (AsyncLocalStorage), so
 * background statements of the library can be told apart; `mark` narrows it further (e.g. while a step call
 * is in flight, in a sequential workload).
 */
export class StatementCounter {
  /** @param {any} pg  the `pg` module */
  constructor(pg) {
    this.als = new AsyncLocalStorage();
    this.marking = false;
    this.clients = new WeakSet();
    this.clientCount = 0;
    /** @type {Map<string, number>} */
    this.texts = new Map();
    this.keepTexts = false;
    this.statements = 0;
    this.commits = 0;
    this.rollbacks = 0;
    this.scoped = 0;
    this.scopedCommits = 0;
    this.marked = 0;
    this.markedCommits = 0;
    const counter = this;
    const inTx = Symbol('peerBenchInTx');
    const original = pg.Client.prototype.query;
    if (original.__peerBenchWrapped) throw new Error('pg.Client.prototype.query is already wrapped');
    /** @this {any} @param {...any} args */
    function countedQuery(...args) {
      const first = args[0];
      const text = typeof first === 'string' ? first : first && typeof first.text === 'string' ? first.text : '';
      if (!counter.clients.has(this)) {
        counter.clients.add(this);
        counter.clientCount++;
      }
      const commit = countCommits(this, inTx, text);
      counter.statements++;
      counter.commits += commit;
      if (counter.als.getStore() !== undefined) {
        counter.scoped++;
        counter.scopedCommits += commit;
        if (counter.marking) {
          counter.marked++;
          counter.markedCommits += commit;
        }
      }
      if (counter.keepTexts) {
        const key = (first && first.name ? `[${first.name}] ` : '') + text.replace(/\s+/g, ' ').slice(0, 120);
        counter.texts.set(key, (counter.texts.get(key) ?? 0) + 1);
      }
      return original.apply(this, args);
    }
    countedQuery.__peerBenchWrapped = true;
    pg.Client.prototype.query = countedQuery;
  }

  reset() {
    this.statements = 0;
    this.commits = 0;
    this.rollbacks = 0;
    this.scoped = 0;
    this.scopedCommits = 0;
    this.marked = 0;
    this.markedCommits = 0;
  }

  /** @returns {CountSnapshot} */
  snapshot() {
    const { statements, commits, rollbacks, scoped, scopedCommits, marked, markedCommits } = this;
    return { statements, commits, rollbacks, scoped, scopedCommits, marked, markedCommits };
  }

  /**
   * Difference of two snapshots.
   * @param {CountSnapshot} a @param {CountSnapshot} b
   * @returns {CountSnapshot}
   */
  static diff(a, b) {
    /** @type {any} */
    const out = {};
    for (const k of Object.keys(b)) out[k] = /** @type {any} */ (b)[k] - /** @type {any} */ (a)[k];
    return out;
  }

  /**
   * Runs `fn` with its statements tagged as scoped.
   * @template T @param {() => T} fn @returns {T}
   */
  scope(fn) {
    return this.als.run(true, fn);
  }

  /**
   * Starts (true) or ends (false) recording the distinct statement texts; at the end prints them to
   * stderr, most frequent first.
   * @param {boolean} on @param {string} [label]
   */
  debugTexts(on, label = 'window') {
    if (on) {
      this.texts.clear();
      this.keepTexts = true;
      return;
    }
    this.keepTexts = false;
    const rows = [...this.texts.entries()].sort((a, b) => b[1] - a[1]);
    console.error(`--- statements sent in the ${label} (${rows.length} distinct) ---`);
    for (const [text, n] of rows) console.error(String(n).padStart(7), text);
  }

  /** @param {boolean} on */
  mark(on) {
    this.marking = on;
  }
}

/**
 * Reads pg_stat_database.xact_commit / xact_rollback of one database through its own connection to
 * *another* database (`adminUrl`), so the readings add no transaction to the measured database.
 *
 * The server publishes a backend's transaction counts lazily: a busy backend at most once a second, an
 * idle one after PGSTAT_IDLE_INTERVAL (10 s), an exiting one at exit. A reading that must include
 * everything done so far is therefore taken either after the library has closed its connections (the
 * backends are gone: {@link XactCounter.waitForNoBackends}) or after waiting `settleMs` (> 10 s).
 */
export class XactCounter {
  /** @param {any} pg @param {string} adminUrl @param {string} database */
  constructor(pg, adminUrl, database) {
    this.pg = pg;
    this.adminUrl = adminUrl;
    this.database = database;
    /** @type {any} */
    this.client = null;
  }

  async connect() {
    this.client = new this.pg.Client({ connectionString: this.adminUrl, application_name: 'peer-bench-stats' });
    await this.client.connect();
  }

  /** @returns {Promise<{commits: number, rollbacks: number}>} */
  async read() {
    // Each reading runs in a fresh transaction, so the cumulative-statistics snapshot is fresh too.
    const { rows } = await this.client.query(
      'select xact_commit::float8 as c, xact_rollback::float8 as r from pg_stat_database where datname = $1',
      [this.database],
    );
    if (!rows.length) throw new Error(`database ${this.database} not found in pg_stat_database`);
    return { commits: rows[0].c, rollbacks: rows[0].r };
  }

  /** Other sessions connected to the measured database. */
  async backends() {
    const { rows } = await this.client.query(
      'select count(*)::int as n from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()',
      [this.database],
    );
    return rows[0].n;
  }

  /**
   * Waits until no other session is connected to the measured database (so every backend has exited and
   * published its statistics). Returns the number still connected at the deadline (0 = clean).
   * @param {number} [timeoutMs]
   */
  async waitForNoBackends(timeoutMs = 10000) {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const n = await this.backends();
      if (n === 0 || performance.now() > deadline) return n;
      await sleep(25);
    }
  }

  async close() {
    if (this.client) await this.client.end().catch(() => undefined);
    this.client = null;
  }
}

/**
 * Runs a runner: installs a watchdog and the error exits, awaits `body`, prints its result as the one JSON
 * line on stdout and exits 0 (libraries may leave handles behind). On any error: message to stderr, exit 1.
 * @param {number} timeoutS
 * @param {() => Promise<Record<string, unknown>>} body
 */
export async function runMain(timeoutS, body) {
  const fail = (/** @type {unknown} */ err) => {
    console.error('peer bench failed:', err instanceof Error ? (err.stack ?? err.message) : err);
    process.exit(1);
  };
  process.on('unhandledRejection', fail);
  process.on('uncaughtException', fail);
  const watchdog = setTimeout(() => fail(new Error(`timed out after ${timeoutS} s`)), timeoutS * 1000);
  watchdog.unref();
  try {
    const result = await body();
    clearTimeout(watchdog);
    writeStdout(`${JSON.stringify(result)}\n`, () => process.exit(0));
  } catch (err) {
    fail(err);
  }
}

/**
 * Block mode (`--serve`), how bench/peers.ts and bench/workers.ts drive a runner: the runner has booted its
 * library and warmed up (untimed), prints `{"ready": true, ...ready}`, then reads one JSON command per line
 * on stdin and answers each with one JSON line on stdout:
 * - `{"cmd": "block", "n": N, "i": I}`: one timed block of N units (`block(N, I)`), answered with its figures;
 * - `{"cmd": "end"}`: shuts the library down (`end()`), answers `{"end": true, ...}`; the runner then exits.
 * Between blocks the library stays up and idle, so that blocks of this runner and of another (the engine's
 * runner on its own database) can alternate a few seconds apart: every engine ÷ peer ratio is then taken
 * per pair of neighbouring blocks. Resolves with the answer to `end`, which {@link runMain} prints.
 * @param {Record<string, unknown>} ready
 * @param {(n: number, i: number) => Promise<Record<string, unknown>>} block
 * @param {() => Promise<Record<string, unknown> | void>} end
 * @returns {Promise<Record<string, unknown>>}
 */
export async function serveBlocks(ready, block, end) {
  writeStdout(`${JSON.stringify({ ready: true, ...ready })}\n`);
  const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of lines) {
    if (!line.trim()) continue;
    const cmd = JSON.parse(line);
    if (cmd.cmd === 'block') {
      const figures = await block(Number(cmd.n), Number(cmd.i ?? 0));
      writeStdout(`${JSON.stringify({ block: true, i: cmd.i ?? 0, n: cmd.n, ...figures })}\n`);
    } else if (cmd.cmd === 'end') {
      lines.close();
      return { end: true, ...((await end()) ?? {}) };
    } else throw new Error(`unknown command ${line}`);
  }
  // stdin closed without 'end': the parent is gone.
  await end();
  return { end: true, orphaned: true };
}

/**
 * Figures of one block of sequential latencies (ms): p50 / p99 / mean / max and units per second.
 * @param {number[]} samples @param {number} units @param {number} elapsedMs
 */
export function blockLatency(samples, units, elapsedMs) {
  const lat = latency(samples);
  return {
    perSecond: round(units / (elapsedMs / 1000), 1),
    elapsedMs: round(elapsedMs, 1),
    p50Ms: round(lat.p50, 4),
    p99Ms: round(lat.p99, 4),
    meanMs: round(lat.mean, 4),
    maxMs: round(lat.max, 4),
  };
}

/**
 * Client-counted statements and commits per unit of one block (no server reading in block mode: the
 * server publishes its counters lazily, see {@link XactCounter}).
 * @param {CountSnapshot} c0 @param {CountSnapshot} c1 @param {number} units @param {boolean} [scoped]
 */
export function blockCounts(c0, c1, units, scoped = false) {
  const d = StatementCounter.diff(c0, c1);
  return {
    statementsPerUnit: round((scoped ? d.scoped : d.statements) / units),
    commitsPerUnit: round((scoped ? d.scopedCommits : d.commits) / units),
    commitsSource: 'client',
  };
}

/**
 * Like {@link parseCli} but errors in the arguments exit 1 with the message.
 * @param {Record<string, WorkloadDefaults>} workloads
 * @param {Record<string, {type: 'string' | 'boolean', default?: string | boolean}>} [extraOptions]
 */
export function cliOrExit(workloads, extraOptions) {
  try {
    return parseCli(workloads, extraOptions);
  } catch (err) {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  }
}

/**
 * Resolves when `predicate()` is true, checking every `everyMs`; rejects after `timeoutMs`.
 * @param {() => boolean} predicate @param {number} timeoutMs @param {string} what @param {number} [everyMs]
 */
export async function waitFor(predicate, timeoutMs, what, everyMs = 1) {
  const deadline = performance.now() + timeoutMs;
  while (!predicate()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(everyMs);
  }
}

/**
 * A promise with its resolve function exposed.
 * @template [T=void]
 */
export class Deferred {
  constructor() {
    /** @type {(value: T) => void} */
    this.resolve = () => undefined;
    /** @type {(err: unknown) => void} */
    this.reject = () => undefined;
    /** @type {Promise<T>} */
    this.promise = new Promise((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
  }
}

/**
 * Sequential pickups of an idle worker: `add(i)` enqueues one job, then wait until the task function
 * resolves `state.entered` with `performance.now()` as its first act, then 2 ms of idle time (the job's
 * completion goes through) before the next one. Pushes add() call start -> task entered, in ms.
 * @param {{ entered: Deferred<number> | null }} state  shared with the task function
 * @param {(i: number) => Promise<unknown>} add
 * @param {number} count
 * @param {number} offset  first job number
 * @param {number[] | null} samples  null for the untimed warm-up
 */
export async function sequentialPickups(state, add, count, offset, samples) {
  for (let i = 0; i < count; i++) {
    /** @type {Deferred<number>} */
    const d = new Deferred();
    state.entered = d;
    const t0 = performance.now();
    await add(offset + i);
    const tEntered = await d.promise;
    if (samples) samples.push(tEntered - t0);
    await sleep(2);
  }
}

/**
 * The result fields of a sequential pickup workload: latency percentiles of `samples`, statements and
 * commits per job in the timed window (`c0`..`c1`), the server's commit count when both
 * `pg_stat_database` readings exist (minus the client's commits after the window, `c1`..`c2`).
 * @param {number} n  timed jobs
 * @param {number} elapsedMs
 * @param {number[]} samples
 * @param {CountSnapshot} c0
 * @param {CountSnapshot} c1
 * @param {CountSnapshot} c2
 * @param {{ commits: number } | null} before
 * @param {{ commits: number } | null} after
 */
export function pickupFields(n, elapsedMs, samples, c0, c1, c2, before, after) {
  const lat = latency(samples);
  const window = StatementCounter.diff(c0, c1);
  const tail = StatementCounter.diff(c1, c2);
  const serverCommits = before && after ? after.commits - before.commits : null;
  return {
    perSecond: round(n / (elapsedMs / 1000), 1),
    elapsedMs: round(elapsedMs, 1),
    p50Ms: round(lat.p50),
    p99Ms: round(lat.p99),
    meanMs: round(lat.mean),
    maxMs: round(lat.max),
    statementsPerUnit: round(window.statements / n),
    commitsPerUnit: serverCommits === null ? round(window.commits / n) : round((serverCommits - tail.commits) / n),
    counts: {
      statements: window.statements,
      commitsClient: window.commits,
      serverXactCommitDelta: serverCommits,
      shutdownCommitsClient: tail.commits,
    },
  };
}

/**
 * The JSON line every runner prints, with the figures it has not measured yet set to null.
 * @param {string} peer
 * @param {string} version
 * @param {Cli} cli
 * @param {{ n: number, unit: string, concurrency: number }} shape
 * @returns {Record<string, unknown>}
 */
export function emptyResult(peer, version, cli, shape) {
  return {
    peer,
    version,
    workload: cli.workload,
    n: shape.n,
    unit: shape.unit,
    concurrency: shape.concurrency,
    warmup: cli.warmup,
    perSecond: null,
    elapsedMs: null,
    p50Ms: null,
    p99Ms: null,
    statementsPerUnit: null,
    commitsPerUnit: null,
  };
}
