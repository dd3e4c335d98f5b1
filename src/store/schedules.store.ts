import { Injectable } from '@nestjs/common';
import { DurableDatabase } from './durable-database';
import type { SqlText } from './durable-names';
import { FIRE_SQL } from './schedule-fire.sql';

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
  /**
   * The attempts of the runs it starts, as the kind's `@DurableWorkflow` declares them where the schedule
   * was declared or created; null when that process did not register the kind (the firing process's).
   */
  maxAttempts: number | null;
}

/** A schedule as a process that registers it declares it; `nextAt`: its first tick after the database's now. */
export type DeclaredSchedule = Omit<ScheduleRow, 'lastAt' | 'lastKey' | 'paused' | 'source'>;

/**
 * Upserts one schedule of this process's code. Its next tick moves only when its cron or time zone
 * changed (else it keeps the tick it was waiting for). A schedule made at run time (`source = 'api'`)
 * that holds the name is left alone: nothing returned. $1 name … $8 next tick if new or changed,
 * $9 concurrency key, $10 max attempts
 */
const DECLARE_SQL: SqlText = (t) => `
insert into ${t.schedules} as s (name, kind, cron, timezone, input, catch_up, overlap, next_at, concurrency_key, max_attempts)
values ($1, $2, $3, $4, $5::jsonb, $6, $7, $8, $9, $10)
on conflict (name) do update
   set kind = excluded.kind, cron = excluded.cron, timezone = excluded.timezone, input = excluded.input,
       catch_up = excluded.catch_up, overlap = excluded.overlap, source = 'code', updated_at = now(),
       concurrency_key = excluded.concurrency_key, max_attempts = excluded.max_attempts,
       next_at = case when s.cron is distinct from excluded.cron or s.timezone is distinct from excluded.timezone
                      then excluded.next_at else s.next_at end
 where s.source = 'code'
returning name`;

/** Schedules of the kinds this process registers that its code no longer declares. $1 kinds, $2 names */
const FORGET_SQL: SqlText = (t) =>
  `delete from ${t.schedules} where kind = any($1::text[]) and name <> all($2::text[]) and source = 'code'`;

/**
 * A schedule created at run time (`source = 'api'`), or one created so before replaced when $10 is
 * true; a name a `@DurableCron` holds, or one made so when $10 is false, is left alone (nothing
 * returned). $1 name … $8 first tick after now, $9 key, $10 max attempts, $11 replace
 */
const CREATE_SQL: SqlText = (t) => `
insert into ${t.schedules} as s (name, kind, cron, timezone, input, catch_up, overlap, next_at, concurrency_key, max_attempts, source)
values ($1, $2, $3, $4, $5::jsonb, $6, $7, $8, $9, $10, 'api')
on conflict (name) do update
   set kind = excluded.kind, cron = excluded.cron, timezone = excluded.timezone, input = excluded.input,
       catch_up = excluded.catch_up, overlap = excluded.overlap, next_at = excluded.next_at,
       concurrency_key = excluded.concurrency_key, max_attempts = excluded.max_attempts, updated_at = now()
 where s.source = 'api' and $11::boolean
returning *`;

/** Deletes a schedule created at run time; returns its source when one has that name. $1 name */
const REMOVE_SQL: SqlText = (t) => `
with gone as (delete from ${t.schedules} where name = $1 and source = 'api' returning source)
select source from gone union all select source from ${t.schedules} where name = $1 and source = 'code'`;

/** Schedules whose next tick is due, by the database clock ($1 ms ahead: the testing kit's clock). */
const DUE_SQL: SqlText = (t) => `
select *, now() + $1 * interval '1 millisecond' as db_now from ${t.schedules}
 where not paused and next_at <= now() + $1 * interval '1 millisecond' order by next_at limit 50`;

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
  maxAttempts: r.max_attempts ?? null,
});

/** $1 … $10 of DECLARE_SQL and CREATE_SQL. */
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
  s.maxAttempts,
];

/** Durable cron schedules (`ai_schedules`), off the run path. @internal */
@Injectable()
export class ScheduleStore {
  constructor(private readonly db: DurableDatabase) {}

  /** The database's clock. */
  async now(): Promise<Date> {
    return (await this.db.query('select now() as now', [])).rows[0].now;
  }

  /**
   * Declares the schedules of the kinds this process registers, and forgets those its code dropped.
   * Returns the names it could not declare: a schedule made at run time holds them.
   */
  async declare(kinds: string[], schedules: DeclaredSchedule[]): Promise<string[]> {
    const held: string[] = [];
    for (const s of schedules)
      if (!(await this.db.query(DECLARE_SQL, scheduleParams(s))).rows.length) held.push(s.name);
    await this.db.query(FORGET_SQL, [kinds, schedules.map((s) => s.name)]);
    return held;
  }

  async due(aheadMs = 0): Promise<Array<ScheduleRow & { dbNow: Date }>> {
    const { rows } = await this.db.query(DUE_SQL, [aheadMs]);
    return rows.map((r) => ({ ...toRow(r), dbNow: r.db_now }));
  }

  /** Fires the ticks of a due schedule (see FIRE_SQL): whether it moved, locked its row, the runs started. */
  async fire(
    s: ScheduleRow,
    nextAt: Date,
    ticks: Array<{ key: string; input: string; at: Date }>,
    maxAttempts: number,
  ): Promise<{ moved: boolean; started: number; locked: boolean; runIds: string[] }> {
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
    const [r] = rows;
    return { moved: r.moved === 1, started: r.started, locked: r.locked === 1, runIds: r.ids };
  }

  /**
   * Creates a schedule at run time (or replaces one made so, with `replace`); null when a `@DurableCron`
   * holds the name, or one made at run time does and `replace` is false.
   */
  async create(s: DeclaredSchedule, replace: boolean): Promise<ScheduleRow | null> {
    const { rows } = await this.db.query(CREATE_SQL, [...scheduleParams(s), replace]);
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
