import 'reflect-metadata';
import { writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import { DEFAULT_NAMES } from '../src/store/durable-names';
import { CLAIM_RUNS_SQL as claimRunsSql } from '../src/store/run-state/claim-runs';
import { LIST_RUNS_BY_TAG_SQL as listRunsSql } from '../src/store/run-reads.store';
import { adminUrl, log, parseBenchArgs, rotate, runMeta } from './cli';
import { BenchDatabase, dropDatabase } from './database';
import { claimedRows, claimValues } from './raw';
import { latency, spread, Spread } from './stats';

/** The engine's claim statement as it sends it in the default schema. */
const CLAIM_RUNS_SQL = claimRunsSql(DEFAULT_NAMES);

/**
 * `npm run bench:scale [-- --quick] [-- --repeat N] [-- --out FILE]`
 * Claim cost as the history grows: one database per size, filled with terminal runs (1 thousand →
 * 1 million, each with its two events, as finished runs leave them); then the engine's own
 * CLAIM_RUNS_SQL is timed on a dedicated connection per database, with one run due and with nothing
 * due, in blocks that alternate between the databases (rotating order), so a noisy neighbour hits
 * every size alike. Beside the times, the buffers each claim touches (EXPLAIN ANALYZE BUFFERS, rolled
 * back): a count that does not depend on how busy the machine is. See bench/README.md.
 */

interface ScaleConfig {
  /**
   * Measurement blocks per size (each block: `claims` due claims, `claims` empty claims and `lists` tag
   * lists, per database); the sizes alternate inside a block, so each ratio is taken per block. With
   * `lists` 0 the runs are filled without tags (no tag rows to write: the fill takes 40 % less; the
   * claim neither reads nor writes them) and the tag list is not measured.
   */
  repeat: number;
  /** Terminal runs in the table at each measured size (ascending). */
  sizes: number[];
  claims: number;
  lists: number;
  /** Untimed claims at each size before the blocks. */
  warmup: number;
}

const FULL: ScaleConfig = {
  repeat: 12,
  sizes: [1_000, 10_000, 100_000, 1_000_000],
  claims: 75,
  lists: 75,
  warmup: 50,
};
/**
 * `--quick`: the headline's two sizes only (1 thousand and 1 million), in short alternating blocks, and no
 * tag list (its figure is no target of the headline; the runs are filled without tags).
 */
const QUICK: ScaleConfig = { ...FULL, repeat: 12, sizes: [1_000, 1_000_000], claims: 60, lists: 0 };
/** `--smoke` (CI): proves the part runs, measures nothing worth reading. */
const SMOKE: ScaleConfig = { repeat: 2, sizes: [1_000, 5_000], claims: 20, lists: 5, warmup: 5 };

const USAGE = `usage: npm run bench:scale -- [--quick] [--repeat N] [--out FILE]
  --smoke      seconds: two small sizes, 20 claims (CI checks that the part still runs)
  --quick      1 thousand and 1 million only, 12 blocks of 60 claims, no tags (default: 4 sizes, 12
               blocks of 75, the list by tag; 1-3 minutes either way, most of it filling a table to 1
               million runs)
  --repeat N   measurement blocks per size (N >= 2)
  --out FILE   where to write the JSON results (default bench/scale-results.json)
  DATABASE_URL admin connection (default postgres://root@127.0.0.1:5432/postgres)`;

const KIND = 'bench.claim';
/** Each terminal run is tagged with one of this many tenants: at 1 million runs, 1,000 runs each. */
const TENANTS = 1000;
/** RunRepository.list's statement as it sends it in the default schema. */
const LIST_RUNS_SQL = listRunsSql(DEFAULT_NAMES);
const WORKER = 'bench-scale';
/** Runs per fill statement. */
const FILL_CHUNK = 50_000;
/**
 * $2 the first run's number, $3 how many, $4 whether tagged: terminal runs with their two events, as
 * finished runs leave them.
 */
const FILL_SQL = `with r as (
  insert into ai_runs (kind, input, status, output, epoch, attempts, cursor, created_at, updated_at, finished_at, tags)
  select $1, jsonb_build_object('order', i), 'succeeded', '{"ok": true}'::jsonb, 1, 1,
         '{"step": 3, "name": "notify", "status": "done", "attempt": 1, "item": null}'::jsonb,
         now() - make_interval(secs => i), now() - make_interval(secs => i), now() - make_interval(secs => i),
         case when $4::boolean then jsonb_build_object('tenant', 't' || (i % ${TENANTS})) end
    from generate_series($2::int, $2::int + $3::int - 1) i
  returning id, created_at
)
insert into ai_events (run_id, event_type, epoch, payload, created_at)
select id, e.t, 1, '{}'::jsonb, created_at from r, (values ('run.claimed'), ('run.succeeded')) e(t)`;
const LEASE_MS = 30_000;

/** One size: the per-block p50 / p99 of both claims, and the buffers of one claim of each. */
export interface SizeResult {
  terminalRuns: number;
  events: number;
  /** Heap + indexes of ai_runs, MiB. */
  runsTableMiB: number;
  due: { p50: Spread; p99: Spread };
  empty: { p50: Spread; p99: Spread };
  buffersDue: number;
  buffersEmpty: number;
  /** `list({ tags: { tenant } })` (the newest 50 of a tenant's runs): per-block p50 and its buffers. */
  tagList: { p50: Spread; buffers: number };
  fillSeconds: number;
}

class ScaleBench {
  private constructor(
    private readonly db: BenchDatabase,
    /** The connection whose claims are timed (prepared statement, nothing else on it). */
    private readonly c: Client,
  ) {}

  static async open(db: BenchDatabase): Promise<ScaleBench> {
    const c = new Client({ connectionString: db.url, application_name: 'dx-bench-scale' });
    await c.connect();
    return new ScaleBench(db, c);
  }

  private get ctl(): Client {
    return this.db.ctl;
  }

  async close(): Promise<void> {
    await this.c.end().catch(() => undefined);
  }

  /**
   * Fills the table up to `total` terminal runs, in chunks, each run with a claimed and a succeeded
   * event, two chunks at a time on two connections (the server's two backends use both cores: the fill,
   * untimed, is most of this part's time).
   */
  async fill(total: number, tagged: boolean): Promise<number> {
    const t0 = performance.now();
    const have = Number(
      (await this.ctl.query(`select count(*) as n from ai_runs where status = 'succeeded'`)).rows[0].n,
    );
    const chunks: Array<[number, number]> = [];
    for (let from = have + 1; from <= total; from += FILL_CHUNK) {
      chunks.push([from, Math.min(FILL_CHUNK, total - from + 1)]);
    }
    const second = new Client({ connectionString: this.db.url, application_name: 'dx-bench-scale-fill' });
    await second.connect();
    try {
      await Promise.all(
        [this.ctl, second].map(async (c) => {
          for (let chunk = chunks.shift(); chunk; chunk = chunks.shift()) {
            await c.query(FILL_SQL, [KIND, ...chunk, tagged]);
          }
        }),
      );
    } finally {
      await second.end().catch(() => undefined);
    }
    const inserted = performance.now();
    await this.ctl.query('vacuum analyze ai_runs');
    await this.ctl.query('vacuum analyze ai_events');
    // As autovacuum would (an insert-only table): the tag search's index-only scan needs its visibility map.
    if (tagged) await this.ctl.query('vacuum analyze ai_run_tags');
    if (total >= 100_000) {
      const s = (ms: number) => (ms / 1000).toFixed(0);
      log(`  inserts ${s(inserted - t0)} s, vacuum analyze ${s(performance.now() - inserted)} s`);
    }
    return (performance.now() - t0) / 1000;
  }

  /** The runs claimed (a claim of nothing answers one row with a null id: the hand-off's offer). */
  private async claim(): Promise<{ rows: Array<{ id: string }> }> {
    const { rows } = await this.c.query({
      name: 'claim',
      text: CLAIM_RUNS_SQL,
      values: claimValues(WORKER, [KIND], 1, LEASE_MS),
    });
    return { rows: claimedRows(rows) };
  }

  /** One due run: inserted (untimed), claimed (timed), finished as a success (untimed). */
  async dueClaims(n: number): Promise<number[]> {
    const ms: number[] = [];
    for (let i = 0; i < n; i++) {
      await this.ctl.query(`insert into ai_runs (kind, input) values ($1, '{}'::jsonb)`, [KIND]);
      const t0 = performance.now();
      const { rows } = await this.claim();
      ms.push(performance.now() - t0);
      if (rows.length !== 1) throw new Error(`claim found ${rows.length} runs, expected the one due`);
      await this.ctl.query(
        `update ai_runs set status = 'succeeded', worker_id = null, lease_expires_at = null, finished_at = now()
          where id = $1`,
        [rows[0].id],
      );
    }
    return ms;
  }

  /** `list({ tags: { tenant } })`: the newest 50 runs of one tenant, a different tenant each time. */
  async tagLists(n: number): Promise<number[]> {
    const ms: number[] = [];
    for (let i = 0; i < n; i++) {
      const tags = JSON.stringify({ tenant: `t${(i * 7) % TENANTS}` });
      const t0 = performance.now();
      const { rows } = await this.c.query({
        name: 'list',
        text: LIST_RUNS_SQL,
        values: [null, null, null, null, 51, null, tags],
      });
      ms.push(performance.now() - t0);
      if (!rows.length) throw new Error(`no run tagged ${tags}`);
    }
    return ms;
  }

  /** Buffers one tag-filtered list touches (EXPLAIN ANALYZE BUFFERS). */
  async tagListBuffers(): Promise<number> {
    const sql = LIST_RUNS_SQL.replace(/\$5\b/g, '51')
      .replace(/\$7\b/g, `'{"tenant":"t7"}'`)
      .replace(/\$[1-6]\b(::[a-z[\]]+)?/g, 'null$1');
    const { rows } = await this.ctl.query(`explain (analyze, buffers, format json) ${sql}`);
    const plan = rows[0]['QUERY PLAN'][0];
    return (plan.Plan['Shared Hit Blocks'] ?? 0) + (plan.Plan['Shared Read Blocks'] ?? 0);
  }

  /** Nothing due: the claim a polling worker sends most of the time. */
  async emptyClaims(n: number): Promise<number[]> {
    const ms: number[] = [];
    for (let i = 0; i < n; i++) {
      const t0 = performance.now();
      const { rows } = await this.claim();
      ms.push(performance.now() - t0);
      if (rows.length) throw new Error('claim found a run where none was due');
    }
    return ms;
  }

  /** Buffers (hit + read) the claim touches, from EXPLAIN (ANALYZE, BUFFERS), rolled back. */
  async claimBuffers(withDue: boolean): Promise<number> {
    await this.ctl.query('begin');
    try {
      if (withDue) await this.ctl.query(`insert into ai_runs (kind, input) values ($1, '{}'::jsonb)`, [KIND]);
      const sql = CLAIM_RUNS_SQL.replace(/\$1\b/g, `'${WORKER}'`)
        .replace(/\$2\b/g, `array['${KIND}']`)
        .replace(/\$3\b/g, '1')
        .replace(/\$4\b/g, String(LEASE_MS))
        .replace(/\$5\b/g, `'{}'`)
        .replace(/\$6\b/g, `array['${KIND}']`)
        .replace(/\$7\b/g, 'array[1]')
        .replace(/\$(8|9|10)\b/g, '0'); // no hand-off slots offered
      const { rows } = await this.ctl.query(`explain (analyze, buffers, format json) ${sql}`);
      const plan = rows[0]['QUERY PLAN'][0];
      // A node's buffers include its children's: the top node holds the statement's total.
      return (plan.Plan['Shared Hit Blocks'] ?? 0) + (plan.Plan['Shared Read Blocks'] ?? 0);
    } finally {
      await this.ctl.query('rollback');
    }
  }

  async sizes(): Promise<{ events: number; mib: number }> {
    const { rows } = await this.ctl.query(
      `select (select count(*) from ai_events)::int as events,
              pg_total_relation_size('ai_runs')::float8 / 1048576 as mib`,
    );
    return { events: rows[0].events, mib: rows[0].mib };
  }
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
    join(__dirname, 'scale-results.json'),
  );
  const admin = adminUrl();
  const started = Date.now();
  const dbs: BenchDatabase[] = [];
  process.once('SIGINT', () => {
    log(`interrupted: dropping ${dbs.map((d) => d.name).join(', ')}`);
    void Promise.all(dbs.map((d) => dropDatabase(admin, d.name))).finally(() => process.exit(130));
  });
  const benches: ScaleBench[] = [];
  const results: SizeResult[] = [];
  try {
    const fillSeconds: number[] = [];
    for (const size of cfg.sizes) {
      const db = await BenchDatabase.create(admin);
      dbs.push(db);
      const bench = await ScaleBench.open(db);
      benches.push(bench);
      log(
        `${db.name}: filling to ${size.toLocaleString('en')} terminal runs (load ${loadavg()[0].toFixed(1)})`,
      );
      fillSeconds.push(await bench.fill(size, cfg.lists > 0));
      log(`  filled in ${fillSeconds[fillSeconds.length - 1].toFixed(0)} s`);
      await bench.dueClaims(cfg.warmup);
      await bench.emptyClaims(cfg.warmup);
    }
    const due = benches.map(() => ({ p50: [] as number[], p99: [] as number[] }));
    const empty = benches.map(() => ({ p50: [] as number[], p99: [] as number[] }));
    const tagged = benches.map(() => [] as number[]);
    for (let b = 0; b < cfg.repeat; b++) {
      log(`block ${b + 1}/${cfg.repeat}: ${cfg.claims} due and ${cfg.claims} empty claims per size`);
      for (const i of rotate([...benches.keys()], b)) {
        const d = latency(await benches[i].dueClaims(cfg.claims));
        const e = latency(await benches[i].emptyClaims(cfg.claims));
        due[i].p50.push(d.p50);
        due[i].p99.push(d.p99);
        empty[i].p50.push(e.p50);
        empty[i].p99.push(e.p99);
        if (cfg.lists) tagged[i].push(latency(await benches[i].tagLists(cfg.lists)).p50);
      }
    }
    for (const [i, bench] of benches.entries()) {
      const { events, mib } = await bench.sizes();
      results.push({
        terminalRuns: cfg.sizes[i],
        events,
        runsTableMiB: mib,
        due: { p50: spread(due[i].p50), p99: spread(due[i].p99) },
        empty: { p50: spread(empty[i].p50), p99: spread(empty[i].p99) },
        buffersDue: await bench.claimBuffers(true),
        buffersEmpty: await bench.claimBuffers(false),
        tagList: { p50: spread(tagged[i]), buffers: cfg.lists ? await bench.tagListBuffers() : NaN },
        fillSeconds: fillSeconds[i],
      });
    }
  } finally {
    await Promise.all(benches.map((b) => b.close()));
    for (const db of dbs)
      await db.close().catch((e) => log(`could not drop ${db.name}: ${(e as Error).message}`));
  }

  const first = results[0];
  const last = results[results.length - 1];
  // Per block: the largest size's p50 over the smallest's, then median / min / max over the blocks.
  const ratio = (pick: (r: SizeResult) => Spread) =>
    spread(pick(last).samples.map((v, i) => v / pick(first).samples[i]));
  const summary = {
    meta: {
      ...runMeta(started, mode),
      blocks: cfg.repeat,
      postgres: dbs[0]?.serverVersion,
    },
    config: cfg,
    sizes: results,
    ratios: {
      dueP50LargestOverSmallest: ratio((r) => r.due.p50),
      emptyP50LargestOverSmallest: ratio((r) => r.empty.p50),
      buffersDueLargestOverSmallest: last.buffersDue / first.buffersDue,
      tagListP50LargestOverSmallest: ratio((r) => r.tagList.p50),
    },
  };
  printSummary(summary);
  writeFileSync(out, `${JSON.stringify(summary, null, 2)}\n`);
  log(`results written to ${out} (${summary.meta.durationSeconds} s)`);
}

function printSummary(s: {
  sizes: SizeResult[];
  ratios: Record<string, Spread | number>;
  meta: Record<string, unknown>;
}): void {
  const f = (v: Spread) =>
    Number.isFinite(v.median) ? `${v.median.toFixed(3)} (${v.min.toFixed(3)}-${v.max.toFixed(3)})` : '-';
  const q = (v: Spread) =>
    Number.isFinite(v.median)
      ? `${v.median.toFixed(3)} (IQR ${v.q1.toFixed(3)}-${v.q3.toFixed(3)}, ${v.min.toFixed(3)}-${v.max.toFixed(3)})`
      : '- (not measured)';
  console.log(
    `\nClaim cost as terminal history grows (${s.meta.blocks} blocks per size; median (min-max) over blocks)`,
  );
  console.log(
    `${'terminal runs'.padStart(14)} ${'events'.padStart(10)} ${'ai_runs MiB'.padStart(12)}  ` +
      `${'due claim p50 ms'.padEnd(22)} ${'empty claim p50 ms'.padEnd(22)} ${'buffers due/empty'.padEnd(18)} ` +
      'list by tag p50 ms (buffers)',
  );
  for (const r of s.sizes) {
    console.log(
      `${r.terminalRuns.toLocaleString('en').padStart(14)} ${r.events.toLocaleString('en').padStart(10)} ` +
        `${r.runsTableMiB.toFixed(1).padStart(12)}  ${f(r.due.p50).padEnd(22)} ${f(r.empty.p50).padEnd(22)} ` +
        `${`${r.buffersDue} / ${r.buffersEmpty}`.padEnd(18)} ${f(r.tagList.p50)} (${r.tagList.buffers})`,
    );
  }
  const due = s.ratios.dueP50LargestOverSmallest as Spread;
  const empty = s.ratios.emptyP50LargestOverSmallest as Spread;
  console.log(`largest / smallest, due claim p50, per block:   ${q(due)}  (target <= 1.20)`);
  console.log(`largest / smallest, empty claim p50, per block: ${q(empty)}`);
  console.log(
    `largest / smallest, list by tag p50, per block: ${q(s.ratios.tagListP50LargestOverSmallest as Spread)}`,
  );
}

if (require.main === module) {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
