// graphile-worker on the database given by --url. See bench/peers/README.md.
//
//   node bench/peers/graphile-worker.mjs --url postgres://root@127.0.0.1:5432/<db> --workload drain|pickup
//        [--n N] [--concurrency C] [--warmup W] [--log-jobs] [--settle-ms MS]
//
// Prints one JSON line on stdout (last line); logs go to stderr.

import pg from 'pg';
import { Logger, makeWorkerUtils, run } from 'graphile-worker';
import {
  blockCounts,
  blockLatency,
  cliOrExit,
  emptyResult,
  Deferred,
  pickupFields,
  sequentialPickups,
  installedVersion,
  log,
  round,
  runMain,
  serveBlocks,
  sleep,
  StatementCounter,
  XactCounter,
} from './common.mjs';

const PEER = 'graphile-worker';
const TASK = 'peer_bench_noop';

const cli = cliOrExit(
  {
    drain: { n: 5000, concurrency: 16, warmup: 500 },
    pickup: { n: 300, concurrency: 16, warmup: 30 },
  },
  // Keep graphile-worker's default console logger, which prints one line per completed job.
  // maxPoolSize of the runner's pool (default: graphile-worker's own default, 10, which it warns is
  // smaller than concurrency 16; its docs suggest concurrency + 2).
  { 'log-jobs': { type: 'boolean', default: false }, 'max-pool-size': { type: 'string' } },
);

const counter = new StatementCounter(pg);

/**
 * Warnings and errors to stderr; info and debug (one "Completed task" line per job) dropped.
 * @returns {Logger}
 */
function quietLogger() {
  return new Logger((scope) => (level, message) => {
    if (level === 'error' || level === 'warning') {
      console.error(`[graphile-worker ${scope.label ?? 'core'}] ${level.toUpperCase()}: ${message}`);
    }
  });
}

/** What the task function sees. */
const state = {
  done: 0,
  target: Infinity,
  /** @type {Deferred<number> | null} */
  allDone: null,
  /** @type {Deferred<number> | null} */
  entered: null,
  firstEntered: NaN,
};

/** The task: a no-op that counts itself (or reports that it was entered, for the pickup workload). */
const taskList = {
  /** @param {unknown} _payload */
  [TASK]: async (_payload) => {
    const now = performance.now();
    if (Number.isNaN(state.firstEntered)) state.firstEntered = now;
    if (state.entered) {
      const d = state.entered;
      state.entered = null;
      d.resolve(now);
    }
    state.done++;
    if (state.done === state.target && state.allDone) state.allDone.resolve(performance.now());
  },
};

await runMain(cli.timeoutS, async () => {
  const version = installedVersion(PEER);
  /** @type {string[]} */
  const notes = [];
  const logger = cli.extra['log-jobs'] ? undefined : quietLogger();
  /** @type {Record<string, unknown>} */
  const runnerOptions = { concurrency: cli.concurrency, crontab: '' };
  const maxPoolSize = cli.extra['max-pool-size'] === undefined ? null : Number(cli.extra['max-pool-size']);
  if (maxPoolSize !== null) {
    if (!Number.isInteger(maxPoolSize) || maxPoolSize < 2) throw new Error('--max-pool-size must be an integer >= 2');
    runnerOptions.maxPoolSize = maxPoolSize;
  }
  const settings = {
    run: { connectionString: '<--url>', taskList: `{ ${TASK} }`, ...runnerOptions, logger: logger ? 'warnings/errors only' : 'default' },
    defaultsKept: `pollInterval 2000 ms, ${maxPoolSize === null ? 'maxPoolSize 10, ' : ''}LISTEN/NOTIFY on, localQueue off, completeJobBatchDelay -1 (off), prepared statements on`,
  };

  const xact = new XactCounter(pg, cli.adminUrl, cli.database);
  await xact.connect();

  /** Counts the jobs left in the table, from a connection of ours (untimed checks only). */
  const jobsLeft = async () => {
    const c = new pg.Client({ connectionString: cli.url });
    await c.connect();
    try {
      const { rows } = await c.query('select count(*)::int as n from graphile_worker._private_jobs');
      return rows[0].n;
    } finally {
      await c.end();
    }
  };

  // Schema: WorkerUtils.migrate() installs it on the empty database (the runner would too).
  let utils = await makeWorkerUtils({ connectionString: cli.url, logger });
  const tm = performance.now();
  await utils.migrate();
  log(`graphile-worker ${version}: schema migrated in ${Math.round(performance.now() - tm)} ms`);

  /** @param {number} count @param {number} offset */
  const specs = (count, offset) =>
    Array.from({ length: count }, (_, i) => ({ identifier: TASK, payload: { i: offset + i } }));

  if (cli.serve) return serve(utils, logger, runnerOptions, settings, version, xact);

  const result = emptyResult(PEER, version, cli, { n: cli.n, unit: 'job', concurrency: cli.concurrency });


  if (cli.workload === 'drain') {
    // ---- untimed warm-up: add and drain `warmup` jobs with a runner of its own ----------------------
    if (cli.warmup > 0) {
      await utils.addJobs(specs(cli.warmup, 0));
      state.done = 0;
      state.target = cli.warmup;
      state.allDone = new Deferred();
      const warm = await run({ connectionString: cli.url, taskList, logger, ...runnerOptions });
      await state.allDone.promise;
      await warm.stop();
      log(`warm-up: ${cli.warmup} jobs drained`);
    }
    // ---- the backlog: n jobs in one WorkerUtils.addJobs call (one statement) ----------------------------
    const ta = performance.now();
    await utils.addJobs(specs(cli.n, cli.warmup));
    const addMs = performance.now() - ta;
    await utils.release();
    // No session left on the database: every backend has published its counts.
    const left = await xact.waitForNoBackends();
    if (left) throw new Error(`${left} session(s) still connected before the timed window`);
    const before = await xact.read();
    const c0 = counter.snapshot();
    if (cli.debugStatements) counter.debugTexts(true);

    // ---- timed: start a runner, count completions in the task, stop when the n-th has run -------------
    state.done = 0;
    state.target = cli.n;
    state.firstEntered = NaN;
    state.allDone = new Deferred();
    const t0 = performance.now();
    const runner = await run({ connectionString: cli.url, taskList, logger, ...runnerOptions });
    const tRunning = performance.now();
    const tDone = await state.allDone.promise;
    const c1 = counter.snapshot();
    if (cli.debugStatements) counter.debugTexts(false);
    await runner.stop();
    const left2 = await xact.waitForNoBackends();
    if (left2) notes.push(`${left2} session(s) still connected 10 s after runner.stop()`);
    const after = await xact.read();
    const c2 = counter.snapshot();
    const remaining = await jobsLeft();
    if (remaining !== 0) throw new Error(`${remaining} job(s) left in graphile_worker._private_jobs after the drain`);

    const elapsedMs = tDone - t0;
    const window = StatementCounter.diff(c0, c1);
    const tail = StatementCounter.diff(c1, c2);
    const serverCommits = after.commits - before.commits;
    Object.assign(result, {
      perSecond: round(cli.n / (elapsedMs / 1000), 1),
      elapsedMs: round(elapsedMs, 1),
      statementsPerUnit: round(window.statements / cli.n),
      commitsPerUnit: round((serverCommits - tail.commits) / cli.n),
      detail: {
        runnerStartMs: round(tRunning - t0, 1),
        firstJobMs: round(state.firstEntered - t0, 1),
        perSecondFromFirstJob: round(cli.n / ((tDone - state.firstEntered) / 1000), 1),
        addJobsMs: round(addMs, 1),
        addJobsPerSecond: round(cli.n / (addMs / 1000), 1),
      },
      counts: {
        statements: window.statements,
        commitsClient: window.commits,
        serverXactCommitDelta: serverCommits,
        serverXactRollbackDelta: after.rollbacks - before.rollbacks,
        shutdownStatements: tail.statements,
        shutdownCommitsClient: tail.commits,
      },
    });
    notes.push(
      `${cli.n} no-op jobs added first with one WorkerUtils.addJobs() call (bulk: one statement; the fastest documented way), then run({ concurrency: ${cli.concurrency} }) started; jobs/s from the run() call until the task has counted the n-th job (its completion write is not waited for); the table is checked empty after runner.stop()`,
      'statementsPerUnit: every statement sent from run() to the last job, per job (runner start-up included); commitsPerUnit: pg_stat_database.xact_commit delta (before: no session connected; after: runner stopped and its backends gone) minus the client-counted commits after the last job, per job',
    );
  } else {
    // ---- pickup: an idle runner; add one job at a time and time add() call -> task entered --------------
    const runner = await run({ connectionString: cli.url, taskList, logger, ...runnerOptions });
    await sleep(200);
    /** @param {number} count @param {number} offset @param {number[] | null} samples */
    const pickups = (count, offset, samples) =>
      sequentialPickups(state, (i) => utils.addJob(TASK, { i }), count, offset, samples);
    await pickups(cli.warmup, 0, null);
    log(`warm-up: ${cli.warmup} pickups`);
    await sleep(cli.settleMs);
    const before = cli.settleMs > 0 ? await xact.read() : null;
    const c0 = counter.snapshot();
    if (cli.debugStatements) counter.debugTexts(true);
    /** @type {number[]} */
    const samples = [];
    state.done = 0;
    const t0 = performance.now();
    await pickups(cli.n, cli.warmup, samples);
    const elapsedMs = performance.now() - t0;
    const c1 = counter.snapshot();
    if (cli.debugStatements) counter.debugTexts(false);
    await runner.stop();
    await utils.release();
    const left = await xact.waitForNoBackends();
    if (left) notes.push(`${left} session(s) still connected 10 s after runner.stop() and utils.release()`);
    const after = before ? await xact.read() : null;
    const c2 = counter.snapshot();
    const remaining = await jobsLeft();
    if (remaining !== 0) throw new Error(`${remaining} job(s) left in graphile_worker._private_jobs`);
    Object.assign(result, {
      concurrency: cli.concurrency,
      ...pickupFields(cli.n, elapsedMs, samples, c0, c1, c2, before, after),
    });
    notes.push(
      `an idle runner (run({ concurrency: ${cli.concurrency} }), default pollInterval, woken by its LISTEN "jobs:insert" as by default); jobs added one at a time with WorkerUtils.addJob() (its own pool), the next after the task was entered (+2 ms); latency = addJob() call start -> task function entered, p50/p99 over n`,
      'perSecond here is just n / elapsed of the sequential loop (not a throughput figure); statements/commits per job include the add, the pick-up and the completion; commitsPerUnit from pg_stat_database.xact_commit (settled reading before, reading after shutdown)',
    );
  }
  notes.push(
    logger
      ? "non-default: logger that prints warnings and errors only (graphile-worker's default console logger prints a line per completed job; --log-jobs keeps it)"
      : 'default console logger (a line per completed job, to stderr)',
    'crontab: "" so that no crontab file is looked up in the working directory',
    maxPoolSize === null
      ? 'maxPoolSize: the default 10 (graphile-worker warns at start that it is smaller than concurrency 16)'
      : `non-default: maxPoolSize ${maxPoolSize}`,
    'graphile-worker 0.18 declares engines.node >=22.18; runs here on Node 20 (npm EBADENGINE warning only)',
  );
  result.settings = settings;
  result.notes = notes.join('; ');
  result.node = process.version;
  await xact.close();
  return result;
});

/**
 * Block mode (`--serve`, see serveBlocks in common.mjs): one runner, started before the first block and
 * kept up (idle in between, LISTEN on) until the end.
 * - `drain`: a block adds n no-op jobs with one WorkerUtils.addJobs() call (one statement, whose commit
 *   NOTIFYs the idle runner) and ends when the task has counted the n-th; then (untimed) until the table
 *   is empty, so that no completion write of this block runs into the next one.
 * - `pickup`: a block is n sequential pickups (addJob() call start -> task entered), as in the one-shot mode.
 * Statements and commits per job are counted on the client, over the block; a drain block also reports
 * the runner process's CPU per job (`cpuUsPerUnit`: addJobs and the runner, until the n-th job is done).
 * @param {any} utils @param {Logger | undefined} logger @param {Record<string, unknown>} runnerOptions
 * @param {Record<string, unknown>} settings @param {string} version @param {XactCounter} xact
 */
async function serve(utils, logger, runnerOptions, settings, version, xact) {
  const checker = new pg.Client({ connectionString: cli.url, application_name: 'peer-bench-check' });
  await checker.connect();
  const emptyTable = async () => {
    const deadline = performance.now() + 30000;
    for (;;) {
      const { rows } = await checker.query('select count(*)::int as n from graphile_worker._private_jobs');
      if (rows[0].n === 0) return;
      if (performance.now() > deadline) throw new Error(`${rows[0].n} job(s) left after the block`);
      await sleep(5);
    }
  };
  const runner = await run({ connectionString: cli.url, taskList, logger, ...runnerOptions });
  await sleep(200);
  let added = 0;
  /** @param {number} count */
  const specs = (count) => Array.from({ length: count }, () => ({ identifier: TASK, payload: { i: added++ } }));
  /** @param {number} count @param {number[] | null} samples */
  const pickups = (count, samples) =>
    sequentialPickups(state, () => utils.addJob(TASK, { i: added++ }), count, 0, samples);
  /** @param {number} n */
  const drain = async (n) => {
    state.done = 0;
    state.target = n;
    state.firstEntered = NaN;
    state.allDone = new Deferred();
    const t0 = performance.now();
    await utils.addJobs(specs(n));
    const addMs = performance.now() - t0;
    const tDone = await state.allDone.promise;
    return { elapsedMs: tDone - t0, addMs, firstJobMs: state.firstEntered - t0 };
  };
  // Untimed warm-up.
  if (cli.workload === 'drain') await drain(cli.warmup);
  else await pickups(cli.warmup, null);
  await emptyTable();
  log(`warm-up: ${cli.warmup} ${cli.workload === 'drain' ? 'jobs drained' : 'pickups'} (block mode)`);
  /** @param {number} n */
  const block = async (n) => {
    const c0 = counter.snapshot();
    if (cli.workload === 'drain') {
      const cpu0 = process.cpuUsage();
      const d = await drain(n);
      const cpu = process.cpuUsage(cpu0);
      const c1 = counter.snapshot();
      await emptyTable();
      return {
        perSecond: round(n / (d.elapsedMs / 1000), 1),
        elapsedMs: round(d.elapsedMs, 1),
        // This process's user + system CPU from addJobs to the n-th job done, per job (µs).
        cpuUsPerUnit: round((cpu.user + cpu.system) / n, 1),
        ...blockCounts(c0, c1, n),
        unit: 'job',
        detail: { addJobsMs: round(d.addMs, 1), firstJobMs: round(d.firstJobMs, 1) },
      };
    }
    /** @type {number[]} */
    const samples = [];
    const t0 = performance.now();
    await pickups(n, samples);
    const elapsed = performance.now() - t0;
    const c1 = counter.snapshot();
    await emptyTable();
    return { ...blockLatency(samples, n, elapsed), ...blockCounts(c0, c1, n), unit: 'job' };
  };
  const end = async () => {
    await runner.stop();
    await utils.release();
    await checker.end();
    await xact.close();
    return { peer: PEER, version, workload: cli.workload, settings };
  };
  return serveBlocks({ peer: PEER, version, workload: cli.workload }, block, end);
}
