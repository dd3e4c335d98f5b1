import 'reflect-metadata';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Pool, PoolClient } from 'pg';
import { DEFAULT_NAMES } from '../src/store/durable-names';
import { CLAIM_RUNS_SQL as claimRunsSql } from '../src/store/run-state/claim-runs';
import { CLAIM_LIMITED_SQL as claimLimitedSql } from '../src/store/run-state/claim-limited';
import { adminUrl, log, parseBenchArgs, rotate, runMeta } from './cli';
import { BenchDatabase, dropDatabase } from './database';
import { claimedRows, claimValues, rawFinish, RawStepWriter } from './raw';
import { median, spread, Spread } from './stats';

const CLAIM_RUNS_SQL = claimRunsSql(DEFAULT_NAMES);
const CLAIM_LIMITED_SQL = claimLimitedSql(DEFAULT_NAMES);

/**
 * `npm run bench:limits [-- --quick | --smoke] [-- --repeat N] [-- --out FILE]`
 * Concurrency limits (docs/FLOW-CONTROL.md), with the engine's own statements on one connection:
 * 1. 1-step runs/s (claim, one fenced step commit, finish) of a kind without limits (CLAIM_RUNS_SQL)
 *    and of a kind limited to 10,000 (CLAIM_LIMITED_SQL: every claim takes a slot, every finish frees
 *    it), in alternating blocks; the ratio per block, and the claim p50 of each.
 * 2. The claim p50 of a due run of that limited kind while 10,000, then 100,000 runs of another kind the
 *    same worker serves are held back behind its full limit (held by the claim itself, as in production),
 *    against the same claim in a second database where none are: blocks alternate between the two (a
 *    connection each), the ratio per pair of blocks. The held runs left the claim index, so the ratio
 *    should be about 1; the plan cache's choices (generic or custom plans) are reported beside it.
 */

interface LimitsConfig {
  repeat: number;
  /** Runs per block and workload of figure 1. */
  runs: number;
  /** Timed claims per block of figure 2, and blocks per database and step. */
  claims: number;
  blocks: number;
  /** Runs held back behind the full limit in figure 2, in steps (cumulative). */
  held: number[];
}

const FULL: LimitsConfig = { repeat: 16, runs: 150, claims: 30, blocks: 12, held: [10_000, 100_000] };
/** `--quick`: the headline's 100,000 held runs only; more, shorter blocks than before, each figure per pair. */
const QUICK: LimitsConfig = { ...FULL, repeat: 12, runs: 100, claims: 20, blocks: 10, held: [100_000] };
/** `--smoke` (CI): proves the part runs, measures nothing worth reading. */
const SMOKE: LimitsConfig = { repeat: 2, runs: 20, claims: 5, blocks: 2, held: [200] };

const USAGE = `usage: npm run bench:limits -- [--quick | --smoke] [--repeat N] [--out FILE]
  --smoke      seconds: tiny workloads (CI checks that the part still runs)
  --quick      12 pairs of blocks of 100 runs, 100,000 held only (default: 16 of 150, 10,000 and 100,000
               held; about a minute either way)
  --repeat N   pairs of blocks of figure 1 (N >= 2)
  --out FILE   where to write the JSON results (default bench/limits-results.json)
  DATABASE_URL admin connection (default postgres://root@127.0.0.1:5432/postgres)`;

const FREE = 'bench.unlimited';
const LIMITED = 'bench.limited';
const FULL_KIND = 'bench.full';
const WORKER = 'bench-limits';
/**
 * Runs one claim may hold back while the bench fills the held-back set (the rows end the same whatever
 * the batch: limited_by set, a run.limited event each; 5,000 a call holds 100,000 back in two thirds of
 * the time 500 a call takes).
 */
const HOLD_BATCH = 5000;
const LEASE_MS = 30_000;

class LimitsBench {
  constructor(
    private readonly db: BenchDatabase,
    private readonly c: PoolClient,
  ) {}

  /** A kind limited to 10,000 (never full here) and one limited to 1 whose slot a running run holds. */
  async setUp(): Promise<void> {
    await this.db.ctl.query(`insert into ai_limits (kind, kind_cap) values ($1, 10000), ($2, 1)`, [
      LIMITED,
      FULL_KIND,
    ]);
    await this.db.ctl.query(
      `insert into ai_slots (scope, n, kind) select jsonb_build_array($1::text)::text, g, $1 from generate_series(1, 10000) g`,
      [LIMITED],
    );
    const [holder] = await this.db.insertRunning(1, FULL_KIND, 'bench-holder');
    await this.db.ctl.query(
      `insert into ai_slots (scope, n, kind, run_id, epoch, taken_at) values (jsonb_build_array($1::text)::text, 1, $1, $2, $3, now())`,
      [FULL_KIND, holder.id, holder.epoch],
    );
  }

  private async claim(limited: boolean, kinds: string[], limit = 1) {
    const { rows } = await this.c.query({
      name: limited ? 'claim_limited' : 'claim',
      text: limited ? CLAIM_LIMITED_SQL : CLAIM_RUNS_SQL,
      values: claimValues(WORKER, kinds, limit, LEASE_MS),
    });
    return claimedRows(rows) as Array<{ id: string; epoch: string }>;
  }

  private insertDue(kind: string, n: number): Promise<unknown> {
    return this.db.ctl.query(
      `insert into ai_runs (kind, input) select $1, '{}'::jsonb from generate_series(1, $2)`,
      [kind, n],
    );
  }

  /** Figure 1: `n` 1-step runs, each claimed, written once and finished; runs/s and claim ms. */
  async runLoop(limited: boolean, n: number): Promise<{ perSecond: number; claimMs: number[] }> {
    await this.insertDue(limited ? LIMITED : FREE, n);
    const claimMs: number[] = [];
    const t0 = performance.now();
    for (let i = 0; i < n; i++) {
      const c0 = performance.now();
      const [run] = await this.claim(limited, [limited ? LIMITED : FREE]);
      claimMs.push(performance.now() - c0);
      if (!run) throw new Error('the claim found no due run');
      const owned = { id: run.id, epoch: Number(run.epoch) };
      await new RawStepWriter(this.c, owned, WORKER).write();
      await rawFinish(this.c, owned, WORKER, { ok: true });
    }
    return { perSecond: n / ((performance.now() - t0) / 1000), claimMs };
  }

  /** Runs of FULL_KIND queued and held back by claims (the limit is full): how many are held in all. */
  async holdBack(total: number): Promise<number> {
    const { rows: have } = await this.db.ctl.query(
      `select count(*)::int as n from ai_runs where kind = $1 and limited_by is not null`,
      [FULL_KIND],
    );
    await this.insertDue(FULL_KIND, total - have[0].n);
    while ((await this.claim(true, [FULL_KIND], HOLD_BATCH)).length === 0) {
      const { rows } = await this.db.ctl.query(
        `select count(*)::int as n from ai_runs where kind = $1 and status = 'pending' and limited_by is null`,
        [FULL_KIND],
      );
      if (rows[0].n === 0) break;
    }
    // As autovacuum would: holding a run back is an UPDATE, whose old row version stays in the claim
    // index until vacuumed (bench/scale.ts vacuums its filled tables the same way).
    await this.db.ctl.query('vacuum analyze ai_runs');
    const { rows } = await this.db.ctl.query(
      `select count(*)::int as n from ai_runs where kind = $1 and limited_by is not null`,
      [FULL_KIND],
    );
    return rows[0].n;
  }

  /** Buffers (hit + read) one due claim of figure 2 touches, from EXPLAIN (ANALYZE, BUFFERS), rolled back. */
  async claimBuffers(): Promise<number> {
    await this.db.ctl.query('begin');
    try {
      await this.db.ctl.query(`insert into ai_runs (kind, input) values ($1, '{}'::jsonb)`, [LIMITED]);
      const sql = CLAIM_LIMITED_SQL.replace(/\$1\b/g, `'${WORKER}'`)
        .replace(/\$2\b/g, `array['${FULL_KIND}', '${LIMITED}']`)
        .replace(/\$3\b/g, '1')
        .replace(/\$4\b/g, String(LEASE_MS))
        .replace(/\$5\b/g, `'{}'::uuid[]`)
        .replace(/\$6\b/g, `array['${FULL_KIND}', '${LIMITED}']`)
        .replace(/\$7\b/g, 'array[1, 1]')
        .replace(/\$(8|9|10)\b/g, '0'); // no hand-off slots offered
      const { rows } = await this.db.ctl.query(`explain (analyze, buffers, format json) ${sql}`);
      const plan = rows[0]['QUERY PLAN'][0];
      return (plan.Plan['Shared Hit Blocks'] ?? 0) + (plan.Plan['Shared Read Blocks'] ?? 0);
    } finally {
      await this.db.ctl.query('rollback');
    }
  }

  /** How often PostgreSQL's plan cache used a generic and a custom plan for the limited claim so far. */
  async plans(): Promise<{ generic: number; custom: number }> {
    const { rows } = await this.c.query(
      `select generic_plans::int as generic, custom_plans::int as custom from pg_prepared_statements where name = 'claim_limited'`,
    );
    return rows[0] ?? { generic: 0, custom: 0 };
  }

  /** Figure 2: due claims of LIMITED by a worker that also serves FULL_KIND; ms each. */
  async dueClaims(n: number): Promise<number[]> {
    const ms: number[] = [];
    for (let i = 0; i < n; i++) {
      await this.insertDue(LIMITED, 1);
      const t0 = performance.now();
      const [run] = await this.claim(true, [FULL_KIND, LIMITED]);
      ms.push(performance.now() - t0);
      if (!run) throw new Error('the claim found no due run');
      await rawFinish(this.c, { id: run.id, epoch: Number(run.epoch) }, WORKER, { ok: true });
    }
    return ms;
  }
}

interface HeldStep {
  held: number;
  /** Claim p50 (ms) with the runs held back, and in the database where none are, per block. */
  claimP50Ms: Spread;
  noneP50Ms: Spread;
  /** Held / none, per pair of neighbouring blocks. */
  ratio: Spread;
  buffers: number;
  /** The plan cache's choices for the held database's claim during the step (holding back included). */
  plans: { generic: number; custom: number };
}

/** Figure 2 at one level: blocks of due claims alternating between the held database and the other. */
async function heldStep(
  main: LimitsBench,
  none: LimitsBench,
  held: number,
  cfg: LimitsConfig,
): Promise<HeldStep> {
  const ms: Record<'held' | 'none', number[]> = { held: [], none: [] };
  const ratio: number[] = [];
  for (let b = 0; b < cfg.blocks; b++) {
    const got: Record<string, number> = {};
    for (const which of rotate(['held', 'none'] as const, b)) {
      got[which] = median(await (which === 'held' ? main : none).dueClaims(cfg.claims));
      ms[which].push(got[which]);
    }
    ratio.push(got.held / got.none);
  }
  return {
    held,
    claimP50Ms: spread(ms.held),
    noneP50Ms: spread(ms.none),
    ratio: spread(ratio),
    buffers: await main.claimBuffers(),
    plans: { generic: 0, custom: 0 },
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
    join(__dirname, 'limits-results.json'),
  );
  const started = Date.now();
  const admin = adminUrl();
  const db = await BenchDatabase.create(admin);
  const pool = new Pool({ connectionString: db.url, max: 1, application_name: 'dx-bench-limits' });
  const c = await pool.connect();
  // Figure 2's reference: the same limits, no run held back (its own connection and plan cache).
  const refDb = await BenchDatabase.create(admin);
  const refPool = new Pool({ connectionString: refDb.url, max: 1, application_name: 'dx-bench-limits-ref' });
  const refC = await refPool.connect();
  try {
    const bench = new LimitsBench(db, c);
    await bench.setUp();
    const ref = new LimitsBench(refDb, refC);
    await ref.setUp();
    const off: number[] = [];
    const on: number[] = [];
    const ratio: number[] = [];
    const claimOff: number[] = [];
    const claimOn: number[] = [];
    for (let r = 0; r < cfg.repeat; r++) {
      const got: Record<string, { perSecond: number; claimMs: number[] }> = {};
      for (const which of rotate(['off', 'on'], r)) {
        log(`  [${r + 1}/${cfg.repeat}] 1-step runs, limits ${which}`);
        got[which] = await bench.runLoop(which === 'on', cfg.runs);
      }
      off.push(got.off.perSecond);
      on.push(got.on.perSecond);
      ratio.push(got.on.perSecond / got.off.perSecond);
      claimOff.push(median(got.off.claimMs));
      claimOn.push(median(got.on.claimMs));
    }
    log(`  claims with nothing held back`);
    let plans = await bench.plans();
    /** The plan cache's choices for the held database's claim since the last call. */
    const planDelta = async () => {
      const now = await bench.plans();
      const d = { generic: now.generic - plans.generic, custom: now.custom - plans.custom };
      plans = now;
      return d;
    };
    const steps: HeldStep[] = [{ ...(await heldStep(bench, ref, 0, cfg)), plans: await planDelta() }];
    for (const n of cfg.held) {
      const h0 = performance.now();
      const held = await bench.holdBack(n);
      log(`  ${held} runs held back in ${((performance.now() - h0) / 1000).toFixed(0)} s`);
      await refDb.ctl.query('vacuum analyze ai_runs'); // as the held database (holdBack)
      log(`  claims with ${held} runs held back behind a full limit, alternating with none`);
      const step = await heldStep(bench, ref, held, cfg);
      steps.push({ ...step, plans: await planDelta() });
    }
    const last = steps[steps.length - 1];
    const summary = {
      meta: {
        ...runMeta(started, mode),
        repeats: cfg.repeat,
        runsPerBlock: cfg.runs,
        claims: cfg.claims,
        heldBlocks: cfg.blocks,
      },
      runsPerSecond: { off: spread(off), on: spread(on), ratio: spread(ratio) },
      claimP50Ms: { off: spread(claimOff), on: spread(claimOn) },
      heldBack: {
        steps,
        ratio: last.ratio.median,
        ratioSpread: last.ratio,
        buffersRatio: last.buffers / steps[0].buffers,
      },
    };
    const f = (s: Spread, d = 1) =>
      `${s.median.toFixed(d)} (IQR ${s.q1.toFixed(d)}-${s.q3.toFixed(d)}, ${s.min.toFixed(d)}-${s.max.toFixed(d)})`;
    console.log(
      `\nConcurrency limits (${mode}, ${cfg.repeat} blocks of ${cfg.runs} 1-step runs; median (min-max))\n` +
        `1-step runs/s, no limit                        ${f(summary.runsPerSecond.off)}\n` +
        `1-step runs/s, kind limited (slot per claim)   ${f(summary.runsPerSecond.on)}\n` +
        `  limited / unlimited, per pair of blocks      ${f(summary.runsPerSecond.ratio, 2)}\n` +
        `claim p50 ms, no limit / limited               ${f(summary.claimP50Ms.off, 3)} / ${f(summary.claimP50Ms.on, 3)}\n` +
        `claim p50 ms, held back / none, blocks alternating between two databases (${cfg.blocks} x ${cfg.claims} claims):\n` +
        steps
          .map(
            (x) =>
              `  ${String(x.held).padStart(7)} held: ${f(x.claimP50Ms, 3)} / ${f(x.noneP50Ms, 3)} = ${f(x.ratio, 2)}` +
              `; ${x.buffers} buffers; plans ${x.plans.generic} generic, ${x.plans.custom} custom`,
          )
          .join('\n'),
    );
    writeFileSync(out, JSON.stringify(summary, null, 2));
    log(`results written to ${out} (${Math.round((Date.now() - started) / 1000)} s)`);
  } finally {
    c.release();
    refC.release();
    await pool.end();
    await refPool.end();
    await db.ctl.end().catch(() => undefined);
    await refDb.ctl.end().catch(() => undefined);
    await dropDatabase(admin, db.name);
    await dropDatabase(admin, refDb.name);
  }
}

void main().catch((err) => {
  console.error(err);
  process.exit(1);
});
