import { Injectable } from '@nestjs/common';
import type { PoolClient } from 'pg';
import { DurableDatabase } from './durable-database';
import type { DurableNames, SqlText } from './durable-names';
import { RETENTION_PARTITION_CHECK_SQL, RETENTION_PARTITION_PRUNE_SQL } from './retention.store';

const WEEK_MS = 7 * 86_400_000;

/** One partition of `ai_events`: its qualified name and range (null: MINVALUE/MAXVALUE; both null: DEFAULT). */
export interface EventPartition {
  name: string;
  isDefault: boolean;
  from: Date | null;
  to: Date | null;
}

/** What one try at dropping a partition did. */
export interface PartitionDrop {
  partition: string;
  dropped: boolean;
  /** Runs whose events there are not past retention (open, retryable, recent, or holding a command). */
  blockers: number;
  /** Runs pruned with the drop, and their events (in the partition and elsewhere). */
  runs: number;
  events: number;
  checkpoints: number;
  /** Set when the partition was left for another sweep: a lock not had in time, or another pod at it. */
  busy?: string;
}

/** The partitions of ai_events with their bounds, oldest first (none when it is not partitioned). */
export const EVENT_PARTITIONS_SQL: SqlText = (t) => `
select format('%I.%I', n.nspname, c.relname) as name, b.bound = 'DEFAULT' as is_default,
       case when m.r[1] is null or m.r[1] = 'MINVALUE' then null else btrim(m.r[1], '''')::timestamptz end as lo,
       case when m.r[2] is null or m.r[2] = 'MAXVALUE' then null else btrim(m.r[2], '''')::timestamptz end as hi
  from pg_inherits i join pg_class c on c.oid = i.inhrelid join pg_namespace n on n.oid = c.relnamespace
 cross join lateral (select pg_get_expr(c.relpartbound, c.oid) as bound) b
  left join lateral regexp_match(b.bound, 'FROM \\((.+)\\) TO \\((.+)\\)') as m(r) on true
 where i.inhparent = to_regclass('${t.events}')
 order by lo nulls first`;

/** The start of the current week (Monday 00:00 UTC) and the database's now. */
const WEEK_START_SQL = `select date_trunc('week', now() at time zone 'UTC') at time zone 'UTC' as start, now() as now`;

/** Serialises partition work of one schema across pods (a transaction-scoped advisory lock). */
const TRY_LOCK_SQL = `select pg_try_advisory_xact_lock(hashtext($1)) as got`;

const iso = (d: Date) => `${d.toISOString().slice(0, 19).replace('T', ' ')}+00`;
const day = (d: Date) => d.toISOString().slice(0, 10).replace(/-/g, '');

/**
 * Upkeep and retention of a partitioned ai_events (migration 1767000000000): weekly partitions made
 * ahead, and old weeks dropped whole when every run with events there is past retention. Every
 * statement that touches the parent's lock runs under `lock_timeout`: a drop waits for an ACCESS
 * EXCLUSIVE lock on ai_events, during which new inserts queue behind it, so it gives up (and tries at
 * the next sweep) rather than stall the step path. @internal
 */
@Injectable()
export class EventPartitionsStore {
  constructor(private readonly db: DurableDatabase) {}

  private get t(): DurableNames {
    return this.db.names;
  }

  /** The partitions, oldest first; empty when ai_events is a plain table. */
  async list(): Promise<EventPartition[]> {
    const { rows } = await this.db.query(EVENT_PARTITIONS_SQL);
    return rows.map((r) => ({ name: r.name, isDefault: r.is_default, from: r.lo, to: r.hi }));
  }

  /**
   * Makes the weekly partitions from this week through `weeksAhead` weeks ahead that no partition covers
   * yet; rows the DEFAULT partition holds for such a week are moved into it. Returns the names made.
   */
  async ensureAhead(weeksAhead: number, lockTimeoutMs = 5000): Promise<string[]> {
    const parts = await this.list();
    if (!parts.length) return [];
    const { rows } = await this.db.query(WEEK_START_SQL);
    const start = (rows[0].start as Date).getTime();
    const made: string[] = [];
    for (let k = 0; k <= weeksAhead; k++) {
      const lo = new Date(start + k * WEEK_MS);
      const hi = new Date(lo.getTime() + WEEK_MS);
      const taken = parts.some(
        (p) =>
          !p.isDefault &&
          (p.from === null || p.from.getTime() < hi.getTime()) &&
          (p.to === null || p.to.getTime() > lo.getTime()),
      );
      if (taken) continue;
      const fallback = parts.find((p) => p.isDefault)?.name;
      const name = await this.db.transaction((c) => this.makeWeek(c, lo, hi, fallback, lockTimeoutMs));
      if (name) made.push(name);
    }
    return made;
  }

  private async makeWeek(
    c: PoolClient,
    lo: Date,
    hi: Date,
    fallback: string | undefined,
    lockTimeoutMs: number,
  ): Promise<string | null> {
    const t = this.t;
    await c.query(`select set_config('lock_timeout', $1, true)`, [`${lockTimeoutMs}ms`]);
    if (!(await c.query(TRY_LOCK_SQL, [`${t.events}:partitions`])).rows[0].got) return null;
    const name = `${t.prefix}ai_events_p${day(lo)}`;
    if ((await c.query(`select to_regclass($1) as r`, [name])).rows[0].r) return null;
    // Standalone, then ATTACH: the parent takes SHARE UPDATE EXCLUSIVE only, so inserts go on meanwhile.
    await c.query(`create table ${name} (like ${t.events} including defaults)`);
    if (fallback) {
      await c.query(
        `with moved as (delete from ${fallback} where created_at >= $1 and created_at < $2 returning *)
         insert into ${name} select * from moved`,
        [lo, hi],
      );
    }
    await c.query(
      `alter table ${t.events} attach partition ${name} for values from ('${iso(lo)}') to ('${iso(hi)}')`,
    );
    return name;
  }

  /**
   * Drops `partition` (its events all older than the horizon) when every run with events there is
   * already pruned or may be pruned now (`statuses`, finished `ageMs` ago, no open command): those not
   * yet pruned are pruned with it in the same transaction (their checkpoints, signals, stream and
   * events elsewhere deleted, the run marked as RETENTION_PRUNE_SQL does). Otherwise nothing changes.
   */
  async dropIfPast(
    partition: EventPartition,
    statuses: string[],
    ageMs: number,
    lockTimeoutMs = 1000,
  ): Promise<PartitionDrop> {
    const out: PartitionDrop = {
      partition: partition.name,
      dropped: false,
      blockers: 0,
      runs: 0,
      events: 0,
      checkpoints: 0,
    };
    const t = this.t;
    try {
      return await this.db.transaction(async (c) => {
        await c.query(`select set_config('lock_timeout', $1, true)`, [`${lockTimeoutMs}ms`]);
        if (!(await c.query(TRY_LOCK_SQL, [`${t.events}:partitions`])).rows[0].got) {
          return { ...out, busy: 'another sweep holds the partitions' };
        }
        // Nothing new lands in a past week; SHARE makes sure of it until the drop.
        await c.query(`lock table ${partition.name} in share mode`);
        const check = await c.query(RETENTION_PARTITION_CHECK_SQL(t, partition.name), [statuses, ageMs]);
        out.blockers = check.rows[0].blockers;
        if (out.blockers > 0) return out;
        const pruned = await c.query(RETENTION_PARTITION_PRUNE_SQL(t, partition.name), [
          ageMs,
          partition.from,
          partition.to,
        ]);
        Object.assign(out, pruned.rows[0]);
        await c.query(`lock table ${t.events} in access exclusive mode`);
        await c.query(`drop table ${partition.name}`);
        return { ...out, dropped: true };
      });
    } catch (err) {
      const code = (err as { code?: string }).code;
      // 55P03 lock_not_available (lock_timeout), 40P01 deadlock, 42P01 dropped meanwhile.
      if (code === '55P03' || code === '40P01' || code === '42P01') {
        return { ...out, busy: (err as Error).message };
      }
      throw err;
    }
  }
}
