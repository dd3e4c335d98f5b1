import { Injectable } from '@nestjs/common';
import { DurableDatabase } from './durable-database';
import type { SqlText } from './durable-names';
import { keyLimitRows } from './run-state/slots';
import { seededUuid } from './sql/seeded-uuid.sql';
import { CURRENT_TIMELINE } from './sql/timeline.sql';

/** A schedule as the database holds it. */
export interface ScheduleRow {
  name: string;
  kind: string;
  cron: string;
  timezone: string;
  input: Record<string, unknown>;
  catchUp: 'latest' | 'all' | 'skip';
  overlap: 'allow' | 'skip' | 'queue';
  nextAt: Date;
  lastAt: Date | null;
  lastKey: string | null;
  paused: boolean;
  /** `code`: a `@DurableCron`; `api`: created with `DurableSchedules.create`. */
  source: 'code' | 'api';
  /** The key of the runs it starts (per-key limits), or null. */
  concurrencyKey: string | null;
}

/** A schedule as a process that registers it declares it; `nextAt`: its first tick after the database's now. */
export type DeclaredSchedule = Omit<ScheduleRow, 'lastAt' | 'lastKey' | 'paused' | 'source'>;

/**
 * Upserts one schedule of this process's code. Its next tick moves only when its cron or time zone
 * changed (else it keeps the tick it was waiting for). $1 name … $8 next tick if new or changed,
 * $9 concurrency key
 */
const DECLARE_SQL: SqlText = (t) => `
insert into ${t.schedules} as s (name, kind, cron, timezone, input, catch_up, overlap, next_at, concurrency_key)
values ($1, $2, $3, $4, $5::jsonb, $6, $7, $8, $9)
on conflict (name) do update
   set kind = excluded.kind, cron = excluded.cron, timezone = excluded.timezone, input = excluded.input,
       catch_up = excluded.catch_up, overlap = excluded.overlap, source = 'code', updated_at = now(),
       concurrency_key = excluded.concurrency_key,
       next_at = case when s.cron is distinct from excluded.cron or s.timezone is distinct from excluded.timezone
                      then excluded.next_at else s.next_at end`;

/** Schedules of the kinds this process registers that its code no longer declares. $1 kinds, $2 names */
const FORGET_SQL: SqlText = (t) =>
  `delete from ${t.schedules} where kind = any($1::text[]) and name <> all($2::text[]) and source = 'code'`;

/**
 * A schedule created at run time (`source = 'api'`), or one created so before replaced; a name a
 * `@DurableCron` holds is left alone (nothing returned). $1 name … $8 first tick after now, $9 key
 */
const CREATE_SQL: SqlText = (t) => `
insert into ${t.schedules} as s (name, kind, cron, timezone, input, catch_up, overlap, next_at, concurrency_key, source)
values ($1, $2, $3, $4, $5::jsonb, $6, $7, $8, $9, 'api')
on conflict (name) do update
   set kind = excluded.kind, cron = excluded.cron, timezone = excluded.timezone, input = excluded.input,
       catch_up = excluded.catch_up, overlap = excluded.overlap, next_at = excluded.next_at,
       concurrency_key = excluded.concurrency_key, updated_at = now()
 where s.source = 'api'
returning *`;

/** Deletes a schedule created at run time; returns its source when one has that name. $1 name */
const REMOVE_SQL: SqlText = (t) => `
with gone as (delete from ${t.schedules} where name = $1 and source = 'api' returning source)
select source from gone union all select source from ${t.schedules} where name = $1 and source = 'code'`;

/** Schedules whose next tick is due, by the database clock. */
const DUE_SQL: SqlText = (t) => `
select *, now() as db_now from ${t.schedules} where not paused and next_at <= now() order by next_at limit 50`;

/**
 * Fires one schedule's due ticks in one statement: locks its row (SKIP LOCKED: another process is firing
 * it) while it still waits for the tick this process read ($2), inserts a run per tick to fire (unless
 * the overlap policy says the last one is still going), each keyed `cron:<name>:<tick>` (a tick gives
 * one run whatever happens), with its `run.created` event, and moves the row to its next tick ($3).
 * The runs get the schedule's concurrency key, and that key its slots and tokens when its kind has
 * per-key limits (`keyLimitRows`). A tick's run has an id made from the schedule's creation time and
 * its key, the same if a failover lost it and the tick fires again; when the schedule was last fired
 * (or declared) on another WAL timeline, its runs look up each command before a first send
 * (`lookup_first`: the lost firing may have run and sent them), and the row takes the server's.
 * `overlap: 'queue'`: while the last run is going nothing fires and the row stays (its tick is still
 * due, asked again every second); then only the oldest due tick fires, and the row moves to the next
 * one ($6[2], itself due at once) or to $3.
 * $1 name, $2 next tick read, $3 next tick after now, $4 keys, $5 inputs (JSON text), $6 ticks,
 * $7 max attempts, $8 wake channel
 */
const FIRE_SQL: SqlText = (t) => `
with cur as (
  select * from ${t.schedules} where name = $1 and next_at = $2 and not paused for update skip locked
), busy as (
  select exists (select 1 from ${t.runs} r join cur on r.idempotency_key = cur.last_key
                  where r.status not in ('succeeded', 'failed', 'cancelled', 'dead_lettered')) as b
), fire as (
  select f.key, f.input::jsonb as input, f.at
    from cur, unnest($4::text[], $5::text[], $6::timestamptz[]) as f(key, input, at)
   where (cur.overlap = 'allow' or not (select b from busy))
     and (cur.overlap <> 'queue' or f.at = $6[1])
), ins as (
  insert into ${t.runs} (id, kind, input, idempotency_key, max_attempts, concurrency_key, lookup_first)
  select ${seededUuid(`extract(epoch from cur.created_at)::text || '/' || fire.key`)}, cur.kind, fire.input,
         fire.key, $7, cur.concurrency_key, coalesce(cur.timeline <> ${CURRENT_TIMELINE}, false)
    from cur, fire
  on conflict (idempotency_key) do nothing
  returning id, kind, idempotency_key, input, concurrency_key
), ${keyLimitRows(t, 'ins')}, ev as (
  insert into ${t.events} (run_id, event_type, epoch, payload)
  select id, 'run.created', 0, jsonb_build_object('kind', kind, 'idempotencyKey', idempotency_key,
                                                  'schedule', $1::text, 'scheduledAt', input->'scheduledAt')
    from ins
), moved as (
  update ${t.schedules} s
     set next_at = case when cur.overlap = 'queue' and cardinality($6::timestamptz[]) > 1
                        then ($6::timestamptz[])[2] else $3 end,
         updated_at = now(), timeline = ${CURRENT_TIMELINE},
         last_at = coalesce((select max(at) from fire), s.last_at),
         last_key = coalesce((select key from fire order by at desc limit 1), s.last_key)
    from cur where s.name = cur.name and not (cur.overlap = 'queue' and (select b from busy))
  returning s.name
)
select (select count(*) from moved)::int as moved, (select count(*) from fire)::int as fired,
       (select count(*) from ins)::int as started, (select count(pg_notify($8, kind)) from ins)::int as woke`;

const LIST_SQL: SqlText = (t) => `select * from ${t.schedules} order by name`;

/** One schedule and the database's clock. $1 name */
const GET_SQL: SqlText = (t) => `select *, now() as db_now from ${t.schedules} where name = $1`;

/** Pauses ($2 true) or resumes a schedule; a resume waits for its next tick after now ($3). $1 name */
const PAUSE_SQL: SqlText = (t) => `
update ${t.schedules} set paused = $2, next_at = case when $2 then next_at else $3 end, updated_at = now()
 where name = $1 returning *`;

const toRow = (r: Record<string, any>): ScheduleRow => ({
  name: r.name,
  kind: r.kind,
  cron: r.cron,
  timezone: r.timezone,
  input: r.input,
  catchUp: r.catch_up,
  overlap: r.overlap,
  nextAt: r.next_at,
  lastAt: r.last_at,
  lastKey: r.last_key,
  paused: r.paused,
  source: r.source,
  concurrencyKey: r.concurrency_key ?? null,
});

/** $1 … $8 of DECLARE_SQL and CREATE_SQL. */
const scheduleParams = (s: DeclaredSchedule): unknown[] => [
  s.name,
  s.kind,
  s.cron,
  s.timezone,
  JSON.stringify(s.input),
  s.catchUp,
  s.overlap,
  s.nextAt,
  s.concurrencyKey,
];

/** Durable cron schedules (`ai_schedules`), off the run path. @internal */
@Injectable()
export class ScheduleStore {
  constructor(private readonly db: DurableDatabase) {}

  /** The database's clock. */
  async now(): Promise<Date> {
    return (await this.db.query('select now() as now', [])).rows[0].now;
  }

  /** Declares the schedules of the kinds this process registers, and forgets those its code dropped. */
  async declare(kinds: string[], schedules: DeclaredSchedule[]): Promise<void> {
    for (const s of schedules) await this.db.query(DECLARE_SQL, scheduleParams(s));
    await this.db.query(FORGET_SQL, [kinds, schedules.map((s) => s.name)]);
  }

  async due(): Promise<Array<ScheduleRow & { dbNow: Date }>> {
    const { rows } = await this.db.query(DUE_SQL, []);
    return rows.map((r) => ({ ...toRow(r), dbNow: r.db_now }));
  }

  /** Fires the ticks of a due schedule (see FIRE_SQL); how many runs it started, and whether it moved. */
  async fire(
    s: ScheduleRow,
    nextAt: Date,
    ticks: Array<{ key: string; input: string; at: Date }>,
    maxAttempts: number,
  ): Promise<{ moved: boolean; started: number }> {
    const { rows } = await this.db.query(FIRE_SQL, [
      s.name,
      s.nextAt,
      nextAt,
      ticks.map((x) => x.key),
      ticks.map((x) => x.input),
      ticks.map((x) => x.at),
      maxAttempts,
      this.db.names.wakeChannel,
    ]);
    return { moved: rows[0].moved === 1, started: rows[0].started };
  }

  /** Creates (or replaces) a schedule at run time; null when a `@DurableCron` holds the name. */
  async create(s: DeclaredSchedule): Promise<ScheduleRow | null> {
    const { rows } = await this.db.query(CREATE_SQL, scheduleParams(s));
    return rows[0] ? toRow(rows[0]) : null;
  }

  /** Removes a schedule created at run time: 'api' when it did, 'code' for a `@DurableCron`'s, null if none. */
  async remove(name: string): Promise<'api' | 'code' | null> {
    return (await this.db.query(REMOVE_SQL, [name])).rows[0]?.source ?? null;
  }

  /** One schedule by name, with the database's clock; null when none has it. */
  async get(name: string): Promise<(ScheduleRow & { dbNow: Date }) | null> {
    const row = (await this.db.query(GET_SQL, [name])).rows[0];
    return row ? { ...toRow(row), dbNow: row.db_now } : null;
  }

  async list(): Promise<ScheduleRow[]> {
    return (await this.db.query(LIST_SQL, [])).rows.map(toRow);
  }

  async setPaused(name: string, paused: boolean, nextAt: Date | null): Promise<ScheduleRow | null> {
    const { rows } = await this.db.query(PAUSE_SQL, [name, paused, nextAt]);
    return rows[0] ? toRow(rows[0]) : null;
  }
}
