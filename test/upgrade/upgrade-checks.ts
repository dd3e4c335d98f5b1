import type { TestDatabase } from '../helpers/database';

/** The effects table the upgrade app's steps write (test/upgrade/upgrade-app.ts). */
export const EFFECTS_TABLE = `create table upgrade_effects (
  id bigint generated always as identity primary key, run_id uuid not null, step text not null, item int,
  release text not null, pid int not null, at timestamptz not null default clock_timestamp())`;

/** How many runs, of `ids`, were claimed by a worker whose id starts with `from`, then by one of `to`. */
export async function claimedFromTo(db: TestDatabase, from: string, to: string): Promise<string[]> {
  const rows = await db.query<{ run_id: string }>(
    `select distinct a.run_id from ai_events a join ai_events b on b.run_id = a.run_id and b.id > a.id
      where a.event_type = 'run.claimed' and b.event_type = 'run.claimed'
        and a.payload->>'workerId' like $1 and b.payload->>'workerId' like $2`,
    [`${from}%`, `${to}%`],
  );
  return rows.map((r) => r.run_id);
}

/** Effects of a step written after that step's checkpoint committed: a step run again after its commit. */
export async function stepsAfterCommit(db: TestDatabase): Promise<unknown[]> {
  return db.query(
    `select e.run_id, e.step, e.release, e.pid, e.at, c.created_at as committed_at
       from upgrade_effects e join ai_checkpoints c on c.run_id = e.run_id and c.step_name = e.step
      where e.at > c.created_at`,
  );
}

/**
 * The crawl items of each run in the order they ran: each is the one after the previous or, after an
 * interruption (a kill, a drain, a lost lease), the previous again (the item in progress had not recorded
 * its progress). An item run again after its progress committed shows as a step back or a skip.
 * Returns the runs that broke that, with their sequence, and the repeats per run.
 */
export async function crawlOrder(
  db: TestDatabase,
): Promise<{ broken: { runId: string; items: number[] }[]; repeats: Map<string, number> }> {
  const rows = await db.query<{ run_id: string; items: number[] }>(
    `select run_id, array_agg(item order by at, id) as items from upgrade_effects where step = 'crawl' group by run_id`,
  );
  const broken: { runId: string; items: number[] }[] = [];
  const repeats = new Map<string, number>();
  for (const r of rows) {
    let n = 0;
    const ok = r.items.every((item, i) => {
      if (i === 0) return item === 0;
      if (item === r.items[i - 1]) n++;
      return item === r.items[i - 1] || item === r.items[i - 1] + 1;
    });
    repeats.set(r.run_id, n);
    if (!ok) broken.push({ runId: r.run_id, items: r.items });
  }
  return { broken, repeats };
}

/** Each run's claims: how many, for bounding the repeats of an interrupted item. */
export async function claimsPerRun(db: TestDatabase): Promise<Map<string, number>> {
  const rows = await db.query<{ run_id: string; n: number }>(
    `select run_id, count(*)::int as n from ai_events where event_type = 'run.claimed' group by run_id`,
  );
  return new Map(rows.map((r) => [r.run_id, r.n]));
}

/**
 * How late each sleep woke, in seconds: the woke step's first effect against the sleep's due time, as
 * the run recorded it when the sleep was called (the database clock + ms): this release's `$due` record,
 * else the `$sleep` record the previous release writes when it parks. With the release that woke it.
 */
export async function sleepLateness(
  db: TestDatabase,
): Promise<{ runId: string; late: number; release: string }[]> {
  return db.query(
    `select e.run_id as "runId", extract(epoch from min(e.at) - coalesce(d.due, s.due))::float8 as late,
            (array_agg(e.release order by e.at))[1] as release
       from upgrade_effects e
       join lateral (select (output #>> '{}')::timestamptz as due from ai_checkpoints
                      where run_id = e.run_id and step_name = '$sleep') s on true
       left join lateral (select (output #>> '{}')::timestamptz as due from ai_checkpoints
                           where run_id = e.run_id and step_name = '$due') d on true
      where e.step = 'woke' group by e.run_id, s.due, d.due`,
  );
}
