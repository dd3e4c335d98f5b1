// DBOS Transact (@dbos-inc/dbos-sdk) on the database given by --url. See bench/peers/README.md.
//
//   node bench/peers/dbos.mjs --url postgres://root@127.0.0.1:5432/<db> --workload step-latency|workflows-direct|workflows-queue
//        [--n N] [--concurrency C] [--warmup W] [--poll-ms MS|default] [--enqueuers E] [--settle-ms MS]
//
// Prints one JSON line on stdout (last line); logs go to stderr.

import pg from 'pg';
import { DBOS } from '@dbos-inc/dbos-sdk';
import {
  blockCounts,
  blockLatency,
  cliOrExit,
  emptyResult,
  installedVersion,
  latency,
  log,
  round,
  runMain,
  serveBlocks,
  sleep,
  StatementCounter,
  XactCounter,
} from './common.mjs';

const PEER = 'dbos';
const PACKAGE = '@dbos-inc/dbos-sdk';
const STEPS_PER_LATENCY_WORKFLOW = 10;
const STEPS_PER_THROUGHPUT_WORKFLOW = 3;
const QUEUE_NAME = 'peer_bench_queue';
/**
 * The queue's base polling interval. DBOS 5.3's default, 1000 ms, caps a queue at workerConcurrency
 * workflows per poll (16/s here); 20 ms sits on the plateau of a sweep (see README).
 */
const QUEUE_POLL_MS = 20;

const cli = cliOrExit(
  {
    'step-latency': { n: 2000, concurrency: 1, warmup: 200 },
    'workflows-direct': { n: 3000, concurrency: 16, warmup: 300 },
    'workflows-queue': { n: 3000, concurrency: 16, warmup: 300 },
  },
  // workflows-queue: the queue's QueueParameters.minPollingIntervalMs (DBOS default 1000 ms; here 20 ms
  // unless `--poll-ms default`), and how many callers enqueue concurrently (default: --concurrency).
  { 'poll-ms': { type: 'string', default: String(QUEUE_POLL_MS) }, enqueuers: { type: 'string' } },
);

// Installed before DBOS opens any connection; DBOS requires the same (deduplicated) bench/node_modules/pg.
const counter = new StatementCounter(pg);

/** Untimed or timed, per workflow run. */
const state = {
  recording: false,
  /** @type {number[]} */
  stepSamples: [],
  completed: 0,
};

/** The trivial step body: returns a small value that DBOS checkpoints. */
async function trivialStep() {
  return 1;
}

/**
 * Ten (or k) trivial steps, one after the other; each `DBOS.runStep` call is timed as the workflow sees it.
 * @param {number} k
 */
async function latencySteps(k) {
  for (let i = 0; i < k; i++) {
    counter.mark(true);
    const t0 = performance.now();
    await DBOS.runStep(trivialStep, { name: `step${i}` });
    const dt = performance.now() - t0;
    counter.mark(false);
    if (state.recording) state.stepSamples.push(dt);
  }
  return k;
}

/**
 * Three trivial steps; counts itself when its last step has returned.
 * @param {number} i
 */
async function threeSteps(i) {
  for (let s = 0; s < STEPS_PER_THROUGHPUT_WORKFLOW; s++) {
    await DBOS.runStep(trivialStep, { name: `step${s}` });
  }
  state.completed++;
  return i;
}

const latencyWorkflow = DBOS.registerWorkflow(latencySteps, { name: 'peerBenchLatencySteps' });
const threeStepWorkflow = DBOS.registerWorkflow(threeSteps, { name: 'peerBenchThreeSteps' });

/**
 * Keeps `concurrency` workflows in flight (DBOS.startWorkflow, no queue, then handle.getResult()) until
 * `count` have completed.
 * @param {number} count @param {number} concurrency
 */
async function runDirect(count, concurrency) {
  let next = 0;
  const lane = async () => {
    while (next < count) {
      const i = next++;
      const handle = await DBOS.startWorkflow(threeStepWorkflow)(i);
      const out = await handle.getResult();
      if (out !== i) throw new Error(`workflow ${i} returned ${out}`);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, lane));
}

/**
 * Counts the queue's workflows in SUCCESS from a connection of ours (to the measured database).
 * @param {any} client
 */
async function successCount(client) {
  const { rows } = await client.query(
    `select count(*)::int as n from dbos.workflow_status where queue_name = $1 and status = 'SUCCESS'`,
    [QUEUE_NAME],
  );
  return rows[0].n;
}

/**
 * Enqueues `count` workflows from `enqueuers` concurrent callers, then waits until all are complete: first
 * in-process (the workflow counts itself after its last step), then in the database (status SUCCESS,
 * polled every 2 ms from a connection of ours, only from that point on). Returns the enqueue time.
 * @param {number} count @param {number} enqueuers
 * @param {number} alreadyDone  SUCCESS rows of the queue before this batch
 * @param {any} checker  a pg.Client on the measured database
 */
async function runQueued(count, enqueuers, alreadyDone, checker) {
  const start = state.completed;
  const t0 = performance.now();
  let next = 0;
  const lane = async () => {
    while (next < count) {
      const i = next++;
      await DBOS.startWorkflow(threeStepWorkflow, { queueName: QUEUE_NAME })(i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(enqueuers, count) }, lane));
  const enqueueMs = performance.now() - t0;
  while (state.completed - start < count) await sleep(1);
  const deadline = performance.now() + 30000;
  while ((await successCount(checker)) < alreadyDone + count) {
    if (performance.now() > deadline) throw new Error('queued workflows did not all reach SUCCESS');
    await sleep(2);
  }
  return enqueueMs;
}

await runMain(cli.timeoutS, async () => {
  const version = installedVersion(PACKAGE);
  /** @type {string[]} */
  const notes = [];
  /** @type {Record<string, unknown>} */
  const settings = { name: 'peer-bench', systemDatabaseUrl: '<--url>' };
  DBOS.setConfig({ name: 'peer-bench', systemDatabaseUrl: cli.url });

  const xact = new XactCounter(pg, cli.adminUrl, cli.database);
  await xact.connect();

  const tLaunch = performance.now();
  await DBOS.launch();
  log(`DBOS ${version} launched in ${Math.round(performance.now() - tLaunch)} ms (schema migrated by launch())`);

  let pollMs = null;
  const enqueuers = cli.extra.enqueuers === undefined ? cli.concurrency : Number(cli.extra.enqueuers);
  if (!Number.isInteger(enqueuers) || enqueuers < 1) throw new Error('--enqueuers must be an integer >= 1');
  /** @type {any} */
  let checker = null;
  if (cli.workload === 'workflows-queue') {
    // The documented knob of a 5.3 queue's dispatch loop: QueueParameters.minPollingIntervalMs (default
    // 1000 ms; the loop polls at it and backs off only on contention). No LISTEN/NOTIFY wake-up for queues.
    pollMs = cli.extra['poll-ms'] === 'default' ? null : Number(cli.extra['poll-ms']);
    if (pollMs !== null && !(pollMs > 0)) throw new Error('--poll-ms must be > 0 (or "default")');
    /** @type {{ workerConcurrency: number, minPollingIntervalMs?: number }} */
    const options = { workerConcurrency: cli.concurrency };
    if (pollMs !== null) options.minPollingIntervalMs = pollMs;
    const queue = await DBOS.registerQueue(QUEUE_NAME, options);
    settings.queue = { name: QUEUE_NAME, ...options };
    settings.enqueuers = enqueuers;
    log(`queue registered: workerConcurrency ${queue.workerConcurrency}, minPollingIntervalMs ${queue.minPollingIntervalMs}`);
    pollMs = queue.minPollingIntervalMs ?? 1000;
    checker = new pg.Client({ connectionString: cli.url, application_name: 'peer-bench-check' });
    await checker.connect();
  }

  // ---- untimed warm-up -------------------------------------------------------------------------------
  let stepsPerWf = STEPS_PER_THROUGHPUT_WORKFLOW;
  let workflows = cli.n;
  if (cli.workload === 'step-latency') {
    stepsPerWf = STEPS_PER_LATENCY_WORKFLOW;
    workflows = Math.ceil(cli.n / stepsPerWf);
    const warm = Math.ceil(cli.warmup / stepsPerWf);
    for (let w = 0; w < warm; w++) await counter.scope(() => latencyWorkflow(stepsPerWf));
  } else if (cli.workload === 'workflows-direct') {
    await counter.scope(() => runDirect(cli.warmup, cli.concurrency));
  } else if (cli.warmup > 0) {
    await runQueued(cli.warmup, enqueuers, 0, checker);
  }
  log(`warm-up done (${cli.warmup} ${cli.workload === 'step-latency' ? 'steps' : 'workflows'})`);

  if (cli.serve) {
    // ---- block mode: timed blocks on request, DBOS up and idle in between (see serveBlocks) -------------
    let queuedSoFar = cli.warmup;
    /** @param {number} n */
    const block = async (n) => {
      const c0 = counter.snapshot();
      const t0 = performance.now();
      if (cli.workload === 'step-latency') {
        state.stepSamples = [];
        state.recording = true;
        const count = Math.max(1, Math.round(n / stepsPerWf));
        for (let w = 0; w < count; w++) {
          const k = await counter.scope(() => latencyWorkflow(stepsPerWf));
          if (k !== stepsPerWf) throw new Error(`workflow returned ${k}`);
        }
        state.recording = false;
        const steps = count * stepsPerWf;
        const elapsed = performance.now() - t0;
        return { ...blockLatency(state.stepSamples, steps, elapsed), ...blockCounts(c0, counter.snapshot(), steps, true), unit: 'step' };
      }
      const done = state.completed;
      if (cli.workload === 'workflows-direct') await counter.scope(() => runDirect(n, cli.concurrency));
      else {
        await runQueued(n, enqueuers, queuedSoFar, checker);
        queuedSoFar += n;
      }
      const elapsed = performance.now() - t0;
      if (state.completed - done !== n) throw new Error(`expected ${n} completions, saw ${state.completed - done}`);
      return {
        perSecond: round(n / (elapsed / 1000), 1),
        elapsedMs: round(elapsed, 1),
        ...blockCounts(c0, counter.snapshot(), n),
        unit: 'workflow',
      };
    };
    const end = async () => {
      if (checker) await checker.end();
      await DBOS.shutdown();
      await xact.close();
      return { peer: PEER, version, workload: cli.workload, settings };
    };
    return serveBlocks({ peer: PEER, version, workload: cli.workload }, block, end);
  }

  // Let every backend publish its transaction counts (idle ones do after 10 s) before the first reading.
  const serverCounts = cli.settleMs > 0;
  if (serverCounts) await sleep(cli.settleMs);
  const before = serverCounts ? await xact.read() : null;
  const c0 = counter.snapshot();
  if (cli.debugStatements) counter.debugTexts(true);

  // ---- timed window -----------------------------------------------------------------------------------
  state.recording = true;
  const doneBefore = state.completed;
  let enqueueMs = null;
  const t0 = performance.now();
  if (cli.workload === 'step-latency') {
    for (let w = 0; w < workflows; w++) {
      const k = await counter.scope(() => latencyWorkflow(stepsPerWf));
      if (k !== stepsPerWf) throw new Error(`workflow returned ${k}`);
    }
  } else if (cli.workload === 'workflows-direct') {
    await counter.scope(() => runDirect(workflows, cli.concurrency));
  } else {
    enqueueMs = await runQueued(workflows, enqueuers, cli.warmup, checker);
  }
  const elapsedMs = performance.now() - t0;
  state.recording = false;
  const c1 = counter.snapshot();
  if (cli.debugStatements) counter.debugTexts(false);
  if (cli.workload !== 'step-latency' && state.completed - doneBefore !== workflows) {
    throw new Error(`expected ${workflows} completions, saw ${state.completed - doneBefore}`);
  }

  // ---- shutdown, then the closing reading (all DBOS backends gone, so their counts are published) -------
  if (checker) await checker.end();
  await DBOS.shutdown();
  const left = await xact.waitForNoBackends();
  if (left) notes.push(`${left} session(s) still connected to the database 10 s after DBOS.shutdown()`);
  const after = serverCounts ? await xact.read() : null;
  const c2 = counter.snapshot();
  await xact.close();

  const steps = workflows * stepsPerWf;
  const window = StatementCounter.diff(c0, c1);
  const whole = StatementCounter.diff(c0, c2);
  const serverCommits = before && after ? after.commits - before.commits : null;
  const serverRollbacks = before && after ? after.rollbacks - before.rollbacks : null;

  const stepWise = cli.workload === 'step-latency';
  const result = emptyResult(PEER, version, cli, {
    n: stepWise ? steps : workflows,
    unit: stepWise ? 'step' : 'workflow',
    concurrency: stepWise ? 1 : cli.concurrency,
  });
  result.elapsedMs = round(elapsedMs, 1);


  if (cli.workload === 'step-latency') {
    const lat = latency(state.stepSamples);
    if (lat.n !== steps) throw new Error(`expected ${steps} step samples, got ${lat.n}`);
    // Everything the workflows sent (scoped = issued from inside the workflow calls), against the
    // server's count over the same span; DBOS's own background loop (queue/schedule maintenance, about
    // two statements a second) and shutdown are unscoped and left out of the per-step figures.
    const background = { statements: whole.statements - whole.scoped, commits: whole.commits - whole.scopedCommits };
    const wfCommitsServer = serverCommits === null ? null : serverCommits - background.commits;
    Object.assign(result, {
      perSecond: round(steps / (elapsedMs / 1000), 1),
      p50Ms: round(lat.p50),
      p99Ms: round(lat.p99),
      meanMs: round(lat.mean),
      maxMs: round(lat.max),
      statementsPerUnit: round(whole.scoped / steps),
      commitsPerUnit: wfCommitsServer === null ? round(whole.scopedCommits / steps) : round(wfCommitsServer / steps),
      perStepCall: {
        statements: round(window.marked / steps),
        commits: round(window.markedCommits / steps),
        source: 'client: statements sent while a DBOS.runStep call was in flight; commits = COMMITs + statements outside BEGIN..COMMIT',
      },
      perWorkflow: {
        steps: stepsPerWf,
        statements: round(whole.scoped / workflows),
        commits: wfCommitsServer === null ? null : round(wfCommitsServer / workflows),
        commitsClient: round(whole.scopedCommits / workflows),
      },
      counts: {
        workflows,
        statementsScoped: whole.scoped,
        commitsScopedClient: whole.scopedCommits,
        serverXactCommitDelta: serverCommits,
        serverXactRollbackDelta: serverRollbacks,
        backgroundStatements: background.statements,
        backgroundCommitsClient: background.commits,
        clientCommitsAll: whole.commits,
      },
    });
    notes.push(
      `sequential workflows of ${stepsPerWf} trivial DBOS.runStep steps (a registered workflow called directly, awaited one after the other); p50/p99 of each runStep call as the workflow sees it`,
      `statementsPerUnit / commitsPerUnit are per step with the workflow's start and end amortised over its ${stepsPerWf} steps (approximation: see perWorkflow); perStepCall counts only what is sent during the runStep calls`,
      serverCounts
        ? 'commitsPerUnit = pg_stat_database.xact_commit delta (read after a settle wait, and after DBOS.shutdown() once its backends exited) minus the client-counted commits of DBOS background statements, divided by steps'
        : 'commitsPerUnit from client-side transaction classification only (--settle-ms 0: no server reading)',
    );
  } else {
    const perSecond = workflows / (elapsedMs / 1000);
    // Throughput workloads: everything sent in the timed window (background included: the queue's
    // dispatcher is part of the cost), per workflow; the server's commit count over the same window plus
    // shutdown, minus the client-counted commits of the shutdown (sent after the window).
    const shutdownCommits = whole.commits - window.commits;
    Object.assign(result, {
      perSecond: round(perSecond, 1),
      stepsPerSecond: round(perSecond * stepsPerWf, 1),
      statementsPerUnit: round(window.statements / workflows),
      commitsPerUnit:
        serverCommits === null ? round(window.commits / workflows) : round((serverCommits - shutdownCommits) / workflows),
      counts: {
        workflows,
        stepsPerWorkflow: stepsPerWf,
        statements: window.statements,
        commitsClient: window.commits,
        serverXactCommitDelta: serverCommits,
        serverXactRollbackDelta: serverRollbacks,
        shutdownCommitsClient: shutdownCommits,
      },
    });
    if (cli.workload === 'workflows-direct') {
      notes.push(
        `${stepsPerWf}-step trivial workflows started with DBOS.startWorkflow(wf)(i) (no queue), ${cli.concurrency} kept in flight, each awaited with handle.getResult(); workflows/s over the timed window after ${cli.warmup} warm-up workflows`,
      );
    } else {
      result.enqueueMs = round(/** @type {number} */ (enqueueMs), 1);
      notes.push(
        `${stepsPerWf}-step trivial workflows enqueued by ${enqueuers} concurrent callers with DBOS.startWorkflow(wf, { queueName })(i) on a queue registered with DBOS.registerQueue (workerConcurrency ${cli.concurrency}); workflows/s from the first enqueue until all ${workflows} are SUCCESS (the workflow counts itself after its last step, then the status rows are confirmed from a separate connection polled every 2 ms)`,
        cli.extra['poll-ms'] === 'default'
          ? `queue polling: the default minPollingIntervalMs (${pollMs} ms), which caps the queue at workerConcurrency per poll`
          : `non-default: queue minPollingIntervalMs ${pollMs} ms (the documented QueueParameters knob; the 5.3 default, 1000 ms, caps the queue at workerConcurrency = ${cli.concurrency} workflows per poll, i.e. ~${cli.concurrency} wf/s)`,
        'DBOS queues are polled by a dispatch loop (no LISTEN/NOTIFY wake-up for queued work in 5.3)',
      );
    }
    notes.push(
      serverCounts
        ? 'commitsPerUnit = pg_stat_database.xact_commit delta over the window (settled reading before; reading after DBOS.shutdown() once its backends exited, minus the client-counted shutdown commits), per workflow'
        : 'commitsPerUnit from client-side transaction classification only (--settle-ms 0: no server reading)',
    );
  }
  notes.push(
    'DBOS settings: DBOS.setConfig({ name, systemDatabaseUrl }) only; everything else default (system pool size, logging, LISTEN/NOTIFY)',
  );
  result.settings = settings;
  result.notes = notes.join('; ');
  result.node = process.version;
  return result;
});
