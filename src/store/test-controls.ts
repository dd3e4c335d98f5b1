import type { INestApplicationContext } from '@nestjs/common';
import { DurableDatabase } from './durable-database';
import type { SqlText } from './durable-names';

/**
 * The testing kit's hand-back of a crashed process's runs: their leases expire now, so the reconciler
 * takes them at once instead of after the lease TTL. A run is the crashed process's when its
 * `worker_id` matches the pattern (the default id holds `:<pid>:`) or is one of the given ids.
 * $1 worker id LIKE pattern, $2 worker ids
 */
export const EXPIRE_CRASHED_LEASES_SQL: SqlText = (
  t,
) => `update ${t.runs} set lease_expires_at = now() - interval '1 millisecond'
      where status = 'running' and (worker_id like $1 or worker_id = any($2::text[]))`;

/**
 * The test clock's skip, in the database: `$1` ms pass for what timers compare. Waiting runs due at a
 * time become due that much sooner, and the due times runs recorded (a sleep's `$due` and `$sleep`, a signal wait's
 * `$deadline:<name>`) move back by as much, so the replay finds them passed. Runs of one id (`$2`), or
 * all unfinished runs (`$2` null). The calls admitted on model budgets (`ai_budget_use.at`) move back
 * too, so their windows pass with the clock: every budget's (`$2` null), or the budget run `$2` is
 * parked on (its `parked_reason`). Leases, and everything else, stay: a faked `now()` would expire
 * every lease. $1 ms, $2 run id or null
 */
export const ADVANCE_CLOCK_SQL: SqlText = (t) => `
with due as (
  update ${t.runs} set available_at = available_at - $1 * interval '1 millisecond'
   where status = 'waiting' and available_at < 'infinity' and ($2::uuid is null or id = $2)
  returning id
), marks as (
  update ${t.checkpoints} c
     set output = to_jsonb((c.output #>> '{}')::timestamptz - $1 * interval '1 millisecond')
    from ${t.runs} r
   where r.id = c.run_id and r.status in ('pending', 'running', 'waiting') and ($2::uuid is null or r.id = $2)
     and (c.step_name in ('$sleep', '$due') or c.step_name like '$deadline:%')
     and jsonb_typeof(c.output) = 'string' and c.output #>> '{}' <> 'infinity'
  returning c.run_id
), windows as (
  update ${t.budgetUse} u set at = u.at - $1 * interval '1 millisecond'
   where $2::uuid is null
      or u.budget = (select substring(r.parked_reason from '^over model budget "(.+)"$') from ${t.runs} r
                      where r.id = $2 and r.status = 'waiting')
  returning u.id
)
select (select count(*) from due)::int as due`;

/**
 * A schedule the test clock fired ahead of the database's clock waits for its tick after that clock
 * again (the test clock was reset): its next tick moves back to $2 when later. $1 name, $2 next tick
 */
export const REWIND_SCHEDULE_SQL: SqlText = (t) => `
update ${t.schedules} set next_at = $2, updated_at = now() where name = $1 and not paused and next_at > $2`;

/** Puts back schedule `name`'s next tick to `nextAt` when later (REWIND_SCHEDULE_SQL). @internal */
export async function rewindSchedule(
  app: INestApplicationContext,
  name: string,
  nextAt: Date,
): Promise<void> {
  await databaseOf(app).query(REWIND_SCHEDULE_SQL, [name, nextAt]);
}

/** Whether run $1 is due now (pending or waiting, and its time has come). $1 run id */
export const DUE_NOW_SQL: SqlText = (t) => `
select exists (select 1 from ${t.runs} where id = $1 and status in ('pending', 'waiting') and available_at <= now()) as due`;

/** Whether run `runId` is due now: a worker's next tick would claim it. @internal */
export async function isDueNow(app: INestApplicationContext, runId: string): Promise<boolean> {
  const { rows } = await databaseOf(app).query<{ due: boolean }>(DUE_NOW_SQL, [runId]);
  return rows[0].due;
}

/** How long run $1 still waits for its due time (0 when not waiting until a time). $1 run id */
export const WAIT_LEFT_SQL: SqlText = (t) => `
select coalesce((select greatest(extract(epoch from (available_at - now())) * 1000, 0)::float8
                   from ${t.runs} where id = $1 and status = 'waiting' and available_at < 'infinity'), 0) as ms`;

/** Skips `ms` of durable time for run `runId`, or for every unfinished run; how many waiting runs moved. @internal */
export async function advanceDurableClock(
  app: INestApplicationContext,
  ms: number,
  runId: string | null,
): Promise<number> {
  const { rows } = await databaseOf(app).query<{ due: number }>(ADVANCE_CLOCK_SQL, [ms, runId]);
  return rows[0].due;
}

/** How long run `runId` still waits for its due time, in ms (0 when it does not). @internal */
export async function waitLeftOf(app: INestApplicationContext, runId: string): Promise<number> {
  const { rows } = await databaseOf(app).query<{ ms: number }>(WAIT_LEFT_SQL, [runId]);
  return Math.ceil(Number(rows[0].ms));
}

/** Expires the leases of running runs whose worker id is LIKE `workerPattern` or in `workerIds`; how many. @internal */
export async function expireCrashedLeases(
  app: INestApplicationContext,
  workerPattern: string,
  workerIds: string[],
): Promise<number> {
  const { rowCount } = await databaseOf(app).query(EXPIRE_CRASHED_LEASES_SQL, [workerPattern, workerIds]);
  return rowCount;
}

function databaseOf(app: INestApplicationContext): DurableDatabase {
  return app.get(DurableDatabase, { strict: false });
}
