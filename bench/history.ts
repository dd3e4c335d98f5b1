import 'reflect-metadata';
import { writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { Client } from 'pg';
import { revertDurableMigrations } from '../src/migrations';
import { DEFAULT_NAMES as T } from '../src/store/durable-names';
import { CLAIM_RUNS_SQL } from '../src/store/run-state/claim-runs';
import { STEP_WRITE_SQL } from '../src/store/run-state/step-write';
import { HISTORY_SQL } from '../src/store/run-history';
import { adminUrl, log, parseBenchArgs, rotate, runMeta } from './cli';
import { BenchDatabase } from './database';
import { claimValues } from './raw';
import {
  fill,
  HistoryShape,
  KIND,
  partitionDrop,
  perRunPrune,
  WORKER,
  weeklyPartitions,
} from './history-fill';
import { latency } from './stats';

/**
 * `npm run bench:history [-- --quick | --smoke] [-- --out FILE]`
 * ai_events partitioned by week (migration 1767000000000) against the plain table, at the same history
 * (20 million events by default, one database each): the engine's own statements, prepared as it sends
 * them, timed in blocks that alternate between the two databases: the step commit (STEP_WRITE_SQL), the
 * re-claim of a long-lived run (CLAIM_RUNS_SQL with its takeover probe of the newest 16 events), a
 * finished run's whole history and a long-lived run's newest page (HISTORY_SQL). Then retention, once
 * each: the oldest week by per-run deletes (plain) and by dropping its partition (partitioned); the
 * next week, which long-lived open runs hold, by per-run deletes on both (partitioned: after the
 * refused drop's check). The fill drops the events' indexes and builds them after.
 */
interface HistoryConfig extends HistoryShape {
  repeat: number;
  ops: number;
}
const FULL: HistoryConfig = {
  ...{ weeks: 20, runs: 200_000, events: 100, checkpoints: 5, longLived: 200, batchRuns: 20_000 },
  ...{ repeat: 3, ops: 200 },
};
const QUICK: HistoryConfig = { ...FULL, runs: 50_000, batchRuns: 10_000, ops: 100 };
const SMOKE: HistoryConfig = {
  ...FULL,
  weeks: 4,
  runs: 2_000,
  batchRuns: 1_000,
  longLived: 10,
  repeat: 2,
  ops: 10,
};
const USAGE = `usage: npm run bench:history -- [--quick | --smoke] [--repeat N] [--out FILE]
  default: 200,000 runs x 100 events (+ long-lived runs) = 20 million events per database, two databases
  DATABASE_URL admin connection (default postgres://root@127.0.0.1:5432/postgres)`;

const STEP = STEP_WRITE_SQL(T);
const CLAIM = CLAIM_RUNS_SQL(T);
const ALL_EVENTS = HISTORY_SQL.events.after(T);
const NEWEST = HISTORY_SQL.events.before(T);

/** One database under test, with a dedicated connection for the timed statements. */
class Side {
  readonly samples: Record<string, number[]> = { step: [], claim: [], history: [], newest: [] };
  info = { fillSeconds: 0, events: 0, partitions: 0 };
  private step = 0;
  constructor(
    readonly label: string,
    readonly db: BenchDatabase,
    readonly c: Client,
    readonly longLived: string[],
  ) {}

  private async timed(key: string, fn: () => Promise<unknown>): Promise<void> {
    const t0 = performance.now();
    await fn();
    this.samples[key].push(performance.now() - t0);
  }

  /** Re-claim a long-lived run (timed), one step commit on it (timed), back to waiting (untimed). */
  async claimAndStep(i: number): Promise<void> {
    const id = this.longLived[i % this.longLived.length];
    await this.db.ctl.query(`update ai_runs set available_at = now() where id = $1`, [id]);
    let epoch = 0;
    await this.timed('claim', async () => {
      const { rows } = await this.c.query({
        name: 'claim',
        text: CLAIM,
        values: claimValues(WORKER, [KIND], 1, 60_000),
      });
      if (rows[0]?.id !== id) throw new Error(`claimed ${rows[0]?.id}, not ${id}`);
      epoch = rows[0].epoch;
    });
    const index = 1000 + this.step++;
    const cp = `[{"step_index":${index},"step_name":"s","output":{"v":${index}},"meta":null,"seq":null,"fingerprint":null}]`;
    const cursor = JSON.stringify({ step: index + 1, name: 's', status: 'done', attempt: 0, item: null });
    await this.timed('step', () =>
      this.c.query({
        name: 'step',
        text: STEP,
        values: [id, WORKER, epoch, cursor, 60_000, cp, 0, 'step.completed', '{"step":"s"}', true],
      }),
    );
    await this.db.ctl.query(
      `update ai_runs set status = 'waiting', worker_id = null, lease_expires_at = null,
              available_at = 'infinity' where id = $1`,
      [id],
    );
  }

  async block(from: number, n: number, runs: number): Promise<void> {
    for (let i = from; i < from + n; i++) {
      await this.claimAndStep(i);
      await this.reads(i, runs);
    }
  }

  async reads(i: number, runs: number): Promise<void> {
    const finished = (
      await this.db.ctl.query(`select md5('r' || $1::int)::uuid as id`, [1 + ((i * 7919) % runs)])
    ).rows[0].id;
    await this.timed('history', () =>
      this.c.query({ name: 'all', text: ALL_EVENTS, values: [finished, null, null] }),
    );
    const open = this.longLived[i % this.longLived.length];
    await this.timed('newest', () =>
      this.c.query({ name: 'newest', text: NEWEST, values: [open, null, 50] }),
    );
  }
}

async function prepare(label: string, partitioned: boolean, s: HistoryConfig): Promise<Side> {
  const db = await BenchDatabase.create(adminUrl());
  if (!partitioned) await revertDurableMigrations({ type: 'postgres', url: db.url }, 1);
  const parts = partitioned ? await weeklyPartitions(db.ctl, s) : 1;
  const seconds = await fill(db.ctl, s, partitioned);
  const { rows } = await db.ctl.query(`select count(*)::int as n from ai_events`);
  log(`${label}: ${rows[0].n} events in ${parts} partition(s), filled in ${seconds.toFixed(0)} s`);
  const c = new Client({ connectionString: db.url, application_name: `dx-bench-history-${label}` });
  await c.connect();
  const ids = await db.ctl.query(`select md5('l' || i)::uuid as id from generate_series(1, $1) i`, [
    s.longLived,
  ]);
  const side = new Side(
    label,
    db,
    c,
    ids.rows.map((r) => r.id),
  );
  side.info = { fillSeconds: Math.round(seconds), events: rows[0].n, partitions: parts };
  return side;
}

async function main(): Promise<void> {
  const started = Date.now();
  const {
    config: s,
    out,
    mode,
  } = parseBenchArgs(
    process.argv.slice(2),
    USAGE,
    { full: FULL, quick: QUICK, smoke: SMOKE },
    'bench/history-results.json',
  );
  // Both fills at once (each mostly waits on its own backend).
  const sides = await Promise.all([prepare('plain', false, s), prepare('partitioned', true, s)]);
  try {
    // Warm-up (untimed: its samples are cleared), then blocks alternating between the two databases.
    for (const side of sides) await side.block(0, 20, s.runs);
    for (const side of sides) for (const k of Object.keys(side.samples)) side.samples[k].length = 0;
    for (let r = 0; r < s.repeat; r++) {
      for (const side of rotate(sides, r)) await side.block(r * s.ops, s.ops, s.runs);
    }
    const { rows } = await sides[0].db.ctl.query(
      `select date_trunc('week', now() at time zone 'UTC') at time zone 'UTC' as w`,
    );
    const week = (k: number) => new Date(rows[0].w.getTime() - (s.weeks - k) * 7 * 86_400_000);
    const day = (d: Date) => d.toISOString().slice(0, 10).replace(/-/g, '');
    const retention = {
      plainWeek0: await perRunPrune(sides[0].c, week(1)),
      partitionedWeek0: await partitionDrop(sides[1].c, `ai_events_p${day(week(0))}`, week(0), week(1)),
      plainWeek1: await perRunPrune(sides[0].c, week(2)),
      partitionedWeek1Check: await partitionDrop(sides[1].c, `ai_events_p${day(week(1))}`, week(1), week(2)),
      partitionedWeek1: await perRunPrune(sides[1].c, week(2)),
    };
    const figures = Object.fromEntries(
      sides.map((side) => [
        side.label,
        Object.fromEntries(Object.entries(side.samples).map(([k, v]) => [k, latency(v)])),
      ]),
    );
    const ratio = (k: string) => (figures.partitioned[k].p50 / figures.plain[k].p50).toFixed(2);
    const result = {
      meta: { ...runMeta(started, mode), loadavg: loadavg() },
      shape: s,
      sides: sides.map((x) => ({ label: x.label, ...x.info })),
      figures,
      retention,
    };
    writeFileSync(out, `${JSON.stringify(result, null, 2)}\n`);
    console.log(`p50 ms              plain    partitioned   ratio`);
    for (const k of ['step', 'claim', 'history', 'newest']) {
      console.log(
        `${k.padEnd(18)} ${figures.plain[k].p50.toFixed(3).padStart(7)} ${figures.partitioned[k].p50.toFixed(3).padStart(12)}   ${ratio(k)}`,
      );
    }
    console.log(JSON.stringify(retention, null, 2));
    console.log(
      `loadavg ${loadavg()
        .map((x) => x.toFixed(1))
        .join(' ')}`,
    );
  } finally {
    for (const side of sides) {
      await side.c.end().catch(() => undefined);
      await side.db.close();
    }
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
