import { mkdtempSync, readFileSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { INestApplication } from '@nestjs/common';
import { Pool } from 'pg';
import { RunRepository } from '../../src';
import { bootApp } from '../helpers/app';
import { startFakeTarget } from '../helpers/fake-target';
import { spawnWorker, waitFor, WorkerProcess } from '../helpers/processes';
import { startReplicaSet } from '../helpers/replica-set';
import { prepareWorkerSchema } from '../helpers/schema';
import { startTcpSwitch } from '../helpers/tcp-switch';

/**
 * A PostgreSQL failover under a workload (issue 23): a primary and a streaming standby, two worker
 * processes reaching the primary through a switch (as a DNS flip or a proxy), runs of the worker
 * fixture's `charge` workflow (a step, a `charge_card` command at a target that does NOT deduplicate
 * under `lookup`, and does under `retry-with-key`, whose contract needs it; a step). Mid-workload the standby's replication link stalls for `lagMs`, the primary stops at once,
 * the standby is promoted and the switch moves the workers to it. Then every run is driven to its end
 * and what the failover cost is counted against ground truth kept outside the database: the target's
 * effects per key and each worker's log of its claims.
 */
export interface FailoverOptions {
  /** `synchronous`: the primary requires the standby (synchronous_standby_names), commits wait for it. */
  mode: 'synchronous' | 'asynchronous';
  runs: number;
  /** How long the replication link stalls before the primary stops (at most, with `keepInFlight`). */
  lagMs: number;
  /**
   * Stop the primary sooner than `lagMs` once only this many runs are unfinished, so the failover
   * lands mid-workload however late a loaded machine reached the trigger (default: wait out `lagMs`).
   */
  keepInFlight?: number;
  /** How long each step of the workflow takes (default 20 ms): longer keeps more runs in flight. */
  stepDelayMs?: number;
  /** The charge command's in-doubt policy in the workers. */
  policy?: 'lookup' | 'retry-with-key';
  log?: (line: string) => void;
}

export interface FailoverResult {
  mode: FailoverOptions['mode'];
  runs: number;
  /** How long the replication link stalled (`lagMs`, or less with `keepInFlight`). */
  lagMs: number;
  /** Runs a worker saw finish `succeeded` (its final write acknowledged) before the primary stopped. */
  succeededBefore: number;
  /** Runs whose status was not final when the primary stopped. */
  inFlightAtFailover: number;
  /** Of `succeededBefore`: runs claimed again afterwards (their acknowledged finish was lost). */
  succeededRunAgain: number;
  /** Runs succeeded on the new primary whose checkpoints are not exactly the workflow's four positions. */
  succeededWithMissingCheckpoint: number;
  /** Keys the target applied more than once (with `lookup`, the target does not deduplicate). */
  keysChargedTwice: number;
  /** Keys the target received more than once (sends; with `retry-with-key` it deduplicates them). */
  keysSentTwice: number;
  /** Runs whose charge reached the target under more than one key (a key must not change on a re-run). */
  runsSentUnderTwoKeys: number;
  /** (run, timeline, epoch) claimed more than once: a fencing token issued twice. */
  fencingTokensIssuedTwice: number;
  /** (run, epoch) claimed on the old timeline and again on the new one (distinct tokens by their timeline). */
  epochsReissuedOnNewTimeline: number;
  /** Claims beyond one per run: work re-run (a failover's re-runs and the fixture's normal resumes). */
  extraClaims: number;
  /** Runs that ended `succeeded` on the new primary (all of them, when the run is healthy). */
  succeededAfter: number;
}

/** A line of a worker's CLAIM_LOG: a claim, or (with `outcome`) how its attempt ended. */
interface Claim {
  runId: string;
  timeline: number;
  epoch: number;
  workerId: string;
  at: number;
  outcome?: string;
}

/** The checkpoints a finished `charge` run holds: a recorded uuid, the quote, the command, the notice. */
const CHARGE_POSITIONS = ['$uuid', 'quote', 'command:charge_card', 'notify_buyer'];
const FINAL = ['succeeded', 'failed', 'dead_lettered'];

export async function runFailover(o: FailoverOptions): Promise<FailoverResult> {
  const log = o.log ?? (() => undefined);
  const rs = await startReplicaSet();
  // `retry-with-key` is for targets that deduplicate keys (its contract): the target does then, and
  // sends are counted apart from effects. `lookup` is measured against a target that does not.
  const target = await startFakeTarget({ honoursKeys: o.policy === 'retry-with-key' });
  const dbSwitch = await startTcpSwitch(rs.primaryPort);
  const url = `postgres://postgres@127.0.0.1:${dbSwitch.port}/postgres`;
  const logDir = mkdtempSync(path.join(tmpdir(), 'durable-failover-'));
  const workers: WorkerProcess[] = [];
  const pool = new Pool({ connectionString: url, max: 2 });
  let producer: INestApplication | undefined;
  pool.on('error', () => undefined);
  try {
    if (o.mode === 'synchronous') {
      await rs.primary(`alter system set synchronous_standby_names = '${rs.standbyName}'`);
      await rs.primary('select pg_reload_conf()');
      await waitFor(
        async () =>
          (await rs.primary(`select 1 from pg_stat_replication where sync_state = 'sync'`)).length > 0,
        10_000,
        'a synchronous standby',
      );
    }
    await prepareWorkerSchema(url);
    for (const w of ['fo-a', 'fo-b']) {
      const worker = spawnWorker({
        DB_URL: url,
        TARGET_URL: target.url,
        CMD_POLICY: o.policy ?? 'lookup',
        WORKER_ID: w,
        CLAIM_LOG: path.join(logDir, `${w}.jsonl`),
        CONCURRENCY: '8',
        STEP_DELAY_MS: String(o.stepDelayMs ?? 20),
        LEASE_TTL_MS: '3000',
        HEARTBEAT_MS: '500',
      });
      workers.push(worker);
    }
    await Promise.all(workers.map((w) => w.ready));
    // A producer-only app starts the runs, as an API pod would.
    producer = await bootApp(url, [], { worker: { enabled: false } });
    const runs = producer.get(RunRepository);
    const ids: string[] = [];
    for (let i = 0; i < o.runs; i++) ids.push((await runs.start('charge', { amount: i + 1 })).run.id);
    const statuses = async () =>
      (
        await pool.query<{ id: string; status: string }>(
          `select id, status from ai_runs where id = any($1)`,
          [ids],
        )
      ).rows;
    await waitFor(
      async () => (await statuses()).filter((r) => r.status === 'succeeded').length >= o.runs / 3,
      60_000,
      'a third of the runs to succeed',
    );
    const before = await statuses();
    log(
      `failover: ${before.filter((r) => r.status === 'succeeded').length} of ${o.runs} runs succeeded; stalling replication ${o.lagMs} ms`,
    );
    rs.replication.pause();
    const pausedAt = Date.now();
    // The stall lasts `lagMs`, or less with `keepInFlight` when the workload is about to run out.
    let atFailover = before;
    for (;;) {
      await new Promise((r) => setTimeout(r, 50));
      atFailover = await statuses().catch(() => atFailover); // in sync mode commits wait: reads answer
      const open = atFailover.filter((r) => !FINAL.includes(r.status)).length;
      if (Date.now() - pausedAt >= o.lagMs || open <= (o.keepInFlight ?? -1)) break;
    }
    const lagMs = Date.now() - pausedAt;
    const stoppedAt = Date.now();
    await rs.stopPrimary();
    rs.replication.cut();
    await rs.promote();
    if (o.mode === 'synchronous') {
      // The new primary has no standby: it must not wait for one.
      await rs.standby(`alter system reset synchronous_standby_names`);
      await rs.standby('select pg_reload_conf()');
    }
    dbSwitch.switchTo(rs.standbyPort);
    log('failover: standby promoted, workers switched to it');
    await waitFor(
      async () => {
        const rows = await statuses().catch(() => []);
        return rows.length === o.runs && rows.every((r) => FINAL.includes(r.status));
      },
      120_000,
      'every run to end on the new primary',
    );
    const after = await statuses();
    const claims: Claim[] = [];
    for (const f of ['fo-a', 'fo-b'].map((w) => path.join(logDir, `${w}.jsonl`)))
      if (existsSync(f))
        for (const line of readFileSync(f, 'utf8').split('\n').filter(Boolean))
          claims.push(JSON.parse(line) as Claim);
    const starts = claims.filter((c) => c.outcome === undefined);
    // Acknowledged: a worker's attempt ends `succeeded` only after its final write committed.
    const finished = new Map<string, number>(); // the first acknowledged finish of each run
    for (const c of claims)
      if (c.outcome === 'succeeded') finished.set(c.runId, Math.min(c.at, finished.get(c.runId) ?? Infinity));
    const succeededBefore = [...finished.values()].filter((at) => at < stoppedAt).length;
    const runAgain = new Set(
      starts.filter((c) => finished.has(c.runId) && c.at > finished.get(c.runId)!).map((c) => c.runId),
    );
    const byToken = new Map<string, number>();
    for (const c of starts) {
      const token = `${c.runId}/${c.timeline}/${c.epoch}`;
      byToken.set(token, (byToken.get(token) ?? 0) + 1);
    }
    // The same epoch of a run claimed on the old timeline and again on the new one: what an epoch
    // alone would have issued twice (the timeline tells the two claims apart).
    const byEpoch = new Map<string, Set<number>>();
    for (const c of starts) {
      const k = `${c.runId}/${c.epoch}`;
      byEpoch.set(k, (byEpoch.get(k) ?? new Set()).add(c.timeline));
    }
    const { rows: cps } = await pool.query<{ run_id: string; names: string[] }>(
      `select r.id as run_id, coalesce(array_agg(c.step_name order by c.step_index) filter (where c.step_name is not null), '{}') as names
         from ai_runs r left join ai_checkpoints c on c.run_id = r.id
        where r.id = any($1) and r.status = 'succeeded' group by r.id`,
      [ids],
    );
    const missing = cps.filter((c) => JSON.stringify(c.names) !== JSON.stringify(CHARGE_POSITIONS)).length;
    const effects = target.effects();
    return {
      mode: o.mode,
      runs: o.runs,
      lagMs,
      succeededBefore,
      inFlightAtFailover: atFailover.filter((r) => !FINAL.includes(r.status)).length,
      succeededRunAgain: runAgain.size,
      succeededWithMissingCheckpoint: missing,
      keysChargedTwice: Object.values(effects).filter((n) => n > 1).length,
      keysSentTwice: Object.values(target.requests()).filter((n) => n > 1).length,
      runsSentUnderTwoKeys: runsUnderTwoKeys(Object.keys(target.requests())),
      fencingTokensIssuedTwice: [...byToken.values()].filter((n) => n > 1).length,
      epochsReissuedOnNewTimeline: [...byEpoch.values()].filter((s) => s.size > 1).length,
      extraClaims: starts.length - new Set(starts.map((c) => c.runId)).size,
      succeededAfter: after.filter((r) => r.status === 'succeeded').length,
    };
  } finally {
    for (const w of workers) w.child.kill('SIGKILL');
    await Promise.all(workers.map((w) => w.exited));
    await producer?.close().catch(() => undefined);
    await pool.end().catch(() => undefined);
    await dbSwitch.close();
    await target.close();
    await rs.dispose();
    rmSync(logDir, { recursive: true, force: true });
  }
}

/** Runs (`run_<id>:…` keys) the target got more than one key of. */
function runsUnderTwoKeys(keys: string[]): number {
  const byRun = new Map<string, number>();
  for (const k of keys) byRun.set(k.split(':')[0], (byRun.get(k.split(':')[0]) ?? 0) + 1);
  return [...byRun.values()].filter((n) => n > 1).length;
}
