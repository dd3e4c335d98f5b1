// pg-boss on the database given by --url. See bench/peers/README.md.
//
//   node bench/peers/pg-boss.mjs --url postgres://root@127.0.0.1:5432/<db> --workload drain|drain-batch10|pickup
//        [--n N] [--concurrency C] [--warmup W] [--no-notify] [--settle-ms MS]
//
// Prints one JSON line on stdout (last line); logs go to stderr.

import pg from 'pg';
import { PgBoss } from 'pg-boss';
import {
  cliOrExit,
  emptyResult,
  Deferred,
  pickupFields,
  sequentialPickups,
  installedVersion,
  log,
  round,
  runMain,
  sleep,
  StatementCounter,
  XactCounter,
} from './common.mjs';

const PEER = 'pg-boss';
const QUEUE = 'peer_bench';
const WARM_QUEUE = 'peer_bench_warmup';
/** pg-boss 12: `pollingIntervalSeconds` / `notifyPollingIntervalSeconds` "Must be >= 0.5". */
const MIN_POLLING_SECONDS = 0.5;

const cli = cliOrExit(
  {
    drain: { n: 5000, concurrency: 16, warmup: 500 },
    'drain-batch10': { n: 10000, concurrency: 16, warmup: 1000 },
    pickup: { n: 300, concurrency: 16, warmup: 30 },
  },
  // pickup: poll only (at the minimum interval), without the v12 LISTEN/NOTIFY wake-up.
  { 'no-notify': { type: 'boolean', default: false } },
);

const counter = new StatementCounter(pg);

/**
 * A started PgBoss instance with its error and warning events logged to stderr.
 * @param {import('pg-boss').ConstructorOptions} options
 */
async function startBoss(options) {
  const boss = new PgBoss(options);
  boss.on('error', (err) => log('pg-boss error:', err?.message ?? err));
  boss.on('warning', (w) => log('pg-boss warning:', w?.message ?? w));
  await boss.start();
  return boss;
}

/** What the handler sees. */
const state = {
  done: 0,
  target: Infinity,
  /** @type {Deferred<number> | null} */
  allDone: null,
  /** @type {Deferred<number> | null} */
  entered: null,
  firstEntered: NaN,
};

/**
 * The work() handler: a no-op over its batch that counts the jobs (or reports that it was entered).
 * @param {Array<{ id: string }>} jobs
 */
async function handler(jobs) {
  const now = performance.now();
  if (Number.isNaN(state.firstEntered)) state.firstEntered = now;
  if (state.entered) {
    const d = state.entered;
    state.entered = null;
    d.resolve(now);
  }
  state.done += jobs.length;
  if (state.done >= state.target && state.allDone) {
    const d = state.allDone;
    state.allDone = null;
    d.resolve(performance.now());
  }
}

/**
 * Completed jobs of a queue, from a connection of ours (untimed checks only).
 * @param {string} name
 */
async function completedJobs(name) {
  const c = new pg.Client({ connectionString: cli.url });
  await c.connect();
  try {
    const { rows } = await c.query(
      `select count(*) filter (where state = 'completed')::int as done, count(*)::int as total from pgboss.job where name = $1`,
      [name],
    );
    return rows[0];
  } finally {
    await c.end();
  }
}

await runMain(cli.timeoutS, async () => {
  const version = installedVersion(PEER);
  /** @type {string[]} */
  const notes = [];
  const xact = new XactCounter(pg, cli.adminUrl, cli.database);
  await xact.connect();

  const result = emptyResult(PEER, version, cli, { n: cli.n, unit: 'job', concurrency: cli.concurrency });

  /** @type {Record<string, unknown>} */
  let settings;

  /** @param {number} count @param {number} offset */
  const jobs = (count, offset) => Array.from({ length: count }, (_, i) => ({ data: { i: offset + i } }));

  if (cli.workload === 'drain' || cli.workload === 'drain-batch10') {
    const batchSize = cli.workload === 'drain' ? 1 : 10;
    // pg-boss 12 workers wait pollingIntervalSeconds between fetches even after a fetch that found
    // work, unless a documented burst trigger holds: burstWhenBatchFull (batchSize > 1 only) or
    // burstWhenReadyExceeds (the queue's cached ready count, refreshed by the supervise/monitor pass).
    /** @type {Record<string, unknown>} */
    const workOptions =
      batchSize === 1
        ? { localConcurrency: cli.concurrency, batchSize, burstWhenReadyExceeds: 1 }
        : { localConcurrency: cli.concurrency, batchSize, burstWhenBatchFull: true };
    settings = {
      constructor: { connectionString: '<--url>' },
      createQueue: `${QUEUE} (default options)`,
      work: workOptions,
    };

    // ---- producer: schema, queue, backlog; a supervise() pass so the queue's ready count is known ----
    const producer = await startBoss({ connectionString: cli.url });
    log(`pg-boss ${version} started (schema installed by start())`);
    await producer.createQueue(WARM_QUEUE);
    await producer.createQueue(QUEUE);
    if (cli.warmup > 0) await producer.insert(WARM_QUEUE, jobs(cli.warmup, 0));
    const ta = performance.now();
    for (let i = 0; i < cli.n; i += 1000) await producer.insert(QUEUE, jobs(Math.min(1000, cli.n - i), i));
    const insertMs = performance.now() - ta;
    await producer.supervise();
    const queued = await producer.getQueue(QUEUE);
    if (!queued || queued.readyCount !== cli.n) {
      throw new Error(`expected the supervise() pass to report ${cli.n} ready jobs, got ${queued?.readyCount}`);
    }
    await producer.stop({ graceful: true, close: true });

    // ---- consumer: a fresh instance (its queue cache is loaded at start() with the ready count) ------
    const consumer = await startBoss({ connectionString: cli.url });
    if (cli.warmup > 0) {
      state.done = 0;
      state.target = cli.warmup;
      state.allDone = new Deferred();
      await consumer.work(WARM_QUEUE, workOptions, handler);
      await state.allDone.promise;
      await consumer.offWork(WARM_QUEUE, { wait: true });
      log(`warm-up: ${cli.warmup} jobs drained`);
    }
    await sleep(cli.settleMs);
    const before = cli.settleMs > 0 ? await xact.read() : null;
    const c0 = counter.snapshot();
    if (cli.debugStatements) counter.debugTexts(true);

    // ---- timed: work() on the backlog until the handler has seen n jobs -------------------------------
    state.done = 0;
    state.target = cli.n;
    state.firstEntered = NaN;
    state.allDone = new Deferred();
    const t0 = performance.now();
    await consumer.work(QUEUE, workOptions, handler);
    const tDone = await state.allDone.promise;
    const c1 = counter.snapshot();
    if (cli.debugStatements) counter.debugTexts(false);
    await consumer.stop({ graceful: true, close: true });
    const left = await xact.waitForNoBackends();
    if (left) notes.push(`${left} session(s) still connected 10 s after stop()`);
    const after = before ? await xact.read() : null;
    const c2 = counter.snapshot();
    const check = await completedJobs(QUEUE);
    if (check.done !== cli.n) throw new Error(`expected ${cli.n} completed jobs, found ${check.done} of ${check.total}`);

    const elapsedMs = tDone - t0;
    const window = StatementCounter.diff(c0, c1);
    const tail = StatementCounter.diff(c1, c2);
    const serverCommits = before && after ? after.commits - before.commits : null;
    Object.assign(result, {
      perSecond: round(cli.n / (elapsedMs / 1000), 1),
      elapsedMs: round(elapsedMs, 1),
      statementsPerUnit: round(window.statements / cli.n),
      commitsPerUnit: serverCommits === null ? round(window.commits / cli.n) : round((serverCommits - tail.commits) / cli.n),
      detail: {
        batchSize,
        firstJobMs: round(state.firstEntered - t0, 1),
        perSecondFromFirstJob: round(cli.n / ((tDone - state.firstEntered) / 1000), 1),
        insertMs: round(insertMs, 1),
        insertPerSecond: round(cli.n / (insertMs / 1000), 1),
      },
      counts: {
        statements: window.statements,
        commitsClient: window.commits,
        serverXactCommitDelta: serverCommits,
        serverXactRollbackDelta: before && after ? after.rollbacks - before.rollbacks : null,
        shutdownCommitsClient: tail.commits,
      },
    });
    notes.push(
      `${cli.n} no-op jobs inserted first (boss.insert, 1000 per call) by a producer instance that then ran boss.supervise() (so the queue's cached readyCount is ${cli.n}) and stopped; a fresh consumer instance (started before the window) then work(${JSON.stringify(workOptions)}); jobs/s from the work() call until the handler has seen the n-th job (its completion write is not waited for); all n checked 'completed' after stop()`,
      batchSize === 1
        ? 'non-default: burstWhenReadyExceeds: 1 (documented burst trigger, minimum 1: fetch continuously while the cached ready count is above 1 and the last fetch was full); without it a v12 worker waits pollingIntervalSeconds (default 2 s, minimum 0.5 s) after every fetch, i.e. at most 16 x 2 = 32 jobs/s at batchSize 1'
        : 'non-default: burstWhenBatchFull: true (documented: keep fetching without delay while fetches come back full); without it each worker waits pollingIntervalSeconds (default 2 s) between batches',
      `${cli.concurrency} workers = localConcurrency (each polls and processes independently), batchSize ${batchSize}`,
      'warm-up: the same work() options on a separate queue, drained before the window, then offWork()',
      'commitsPerUnit = pg_stat_database.xact_commit delta (settled reading before; reading after stop() once the backends exited) minus the client-counted commits after the n-th job, per job',
    );
  } else {
    // ---- pickup: one instance, idle workers; send one job at a time, time send() call -> handler entered
    const notify = !cli.extra['no-notify'];
    /** @type {Record<string, unknown>} */
    const ctorOptions = { connectionString: cli.url };
    if (notify) ctorOptions.useListenNotify = true;
    const workOptions = {
      localConcurrency: cli.concurrency,
      batchSize: 1,
      pollingIntervalSeconds: MIN_POLLING_SECONDS,
      ...(notify ? { notifyPollingIntervalSeconds: MIN_POLLING_SECONDS } : {}),
    };
    settings = {
      constructor: { ...ctorOptions, connectionString: '<--url>' },
      createQueue: notify ? { notify: true } : 'default options',
      work: workOptions,
    };
    const boss = await startBoss(/** @type {any} */ (ctorOptions));
    log(`pg-boss ${version} started (schema installed by start())`);
    await boss.createQueue(QUEUE, notify ? { notify: true } : {});
    await boss.work(QUEUE, workOptions, handler);
    await sleep(1000);
    /** @param {number} count @param {number} offset @param {number[] | null} samples */
    const pickups = (count, offset, samples) =>
      sequentialPickups(state, (i) => boss.send(QUEUE, { i }), count, offset, samples);
    await pickups(cli.warmup, 0, null);
    log(`warm-up: ${cli.warmup} pickups`);
    await sleep(cli.settleMs);
    const before = cli.settleMs > 0 ? await xact.read() : null;
    const c0 = counter.snapshot();
    if (cli.debugStatements) counter.debugTexts(true);
    /** @type {number[]} */
    const samples = [];
    const t0 = performance.now();
    await pickups(cli.n, cli.warmup, samples);
    const elapsedMs = performance.now() - t0;
    const c1 = counter.snapshot();
    if (cli.debugStatements) counter.debugTexts(false);
    await boss.stop({ graceful: true, close: true });
    const left = await xact.waitForNoBackends();
    if (left) notes.push(`${left} session(s) still connected 10 s after stop()`);
    const after = before ? await xact.read() : null;
    const c2 = counter.snapshot();
    const check = await completedJobs(QUEUE);
    if (check.done !== cli.n + cli.warmup) {
      throw new Error(`expected ${cli.n + cli.warmup} completed jobs, found ${check.done} of ${check.total}`);
    }
    Object.assign(result, {
      ...pickupFields(cli.n, elapsedMs, samples, c0, c1, c2, before, after),
    });
    notes.push(
      notify
        ? `non-default: useListenNotify: true and the queue created with notify: true (pg-boss 12's LISTEN/NOTIFY wake-up: a send() wakes every worker of the queue); polling kept as the backstop at the documented minimum, pollingIntervalSeconds and notifyPollingIntervalSeconds ${MIN_POLLING_SECONDS} s`
        : `polling only (--no-notify): pollingIntervalSeconds ${MIN_POLLING_SECONDS} s, the documented minimum (non-default; default 2 s)`,
      `${cli.concurrency} idle workers (localConcurrency), batchSize 1; jobs sent one at a time with boss.send() on the same instance, the next after the handler was entered (+2 ms); latency = send() call start -> handler entered, p50/p99 over n`,
      'perSecond here is just n / elapsed of the sequential loop (not a throughput figure); statements/commits per job include the send, every worker fetch (idle polls too) and the completion; commitsPerUnit from pg_stat_database.xact_commit (settled reading before, reading after stop())',
    );
  }
  notes.push(
    'everything else default (pool size 10, supervise/schedule/migrate on, retention, no OpenTelemetry SDK registered)',
    'pg-boss 12 declares engines.node >=22.12; runs here on Node 20 (npm EBADENGINE warning only)',
  );
  result.settings = settings;
  result.notes = notes.join('; ');
  result.node = process.version;
  await xact.close();
  return result;
});
