import { Injectable } from '@nestjs/common';
import { DurableDatabase } from './durable-database';
import type { SqlText } from './durable-names';
import { RECORD_FORMAT } from './record-format';

/**
 * A worker says it is alive and which kinds it serves (one upsert), and forgets the rows of workers
 * dead for a while in the same statement (rows expired more than a day ago: a reader ignores an expired
 * row anyway; the day keeps a crashed worker visible to an operator). With them what a start may hand
 * it (the slots are its claims', handoff-offer.ts): the kinds, the hand-off lease, the record format it
 * replays. $1 worker id, $2 kinds, $3 ttl ms, $4 the versions of each kind (`{"kind": [2, 1]}`),
 * $5 the kinds it takes by hand-off, $6 its hand-off lease ms (null: none), $7 the process's first beat:
 * a process that took over the worker id of an earlier one withdraws the slots that one offered
 */
export const WORKER_BEAT_SQL: SqlText = (t) => `
with gone as (
  delete from ${t.workers} where expires_at < now() - interval '1 day' and worker_id <> $1
)
insert into ${t.workers} as wk (worker_id, kinds, versions, expires_at, handoff_kinds, handoff_ms, record_format)
values ($1, $2::text[], $4::jsonb, now() + make_interval(secs => $3::float8 / 1000), $5::text[], $6::int, ${RECORD_FORMAT})
on conflict (worker_id) do update
   set kinds = excluded.kinds, versions = excluded.versions, seen_at = now(), expires_at = excluded.expires_at,
       handoff_kinds = excluded.handoff_kinds, handoff_ms = excluded.handoff_ms, record_format = excluded.record_format,
       handoff_slots = case when $7::boolean then 0 else wk.handoff_slots end`;

/** A worker that shuts down removes its row. $1 worker id */
export const WORKER_LEAVE_SQL: SqlText = (t) => `delete from ${t.workers} where worker_id = $1`;

/** Whether a live worker serves kind $1 (any version of it). */
export const KIND_SERVED_SQL: SqlText = (t) =>
  `select exists (select 1 from ${t.workers} where expires_at > now() and $1 = any(kinds)) as served`;

/**
 * Every worker an operator may ask about: each presence row, and each worker id holding a running run
 * without one (a worker draining, or one whose row was forgotten), with the runs it holds now.
 */
/** Whether a worker declared a per-key limit for a kind (`perKeyConcurrency` or `rateLimit.perKey`). */
export const KIND_KEYED_SQL: SqlText = (t) =>
  `select exists (select 1 from ${t.limits} where kind = $1 and (key_cap is not null or rate_per_key)) as keyed`;

export const WORKERS_SQL: SqlText = (t) => `
with held as (
  select worker_id, count(*)::int as running from ${t.runs}
   where status = 'running' and worker_id is not null group by worker_id
)
select coalesce(w.worker_id, h.worker_id) as worker_id, w.kinds, w.versions, w.started_at, w.seen_at, w.expires_at,
       coalesce(w.expires_at > now(), false) as live, coalesce(h.running, 0) as running
  from ${t.workers} w full join held h on h.worker_id = w.worker_id
 order by 6 desc, 1`;

/** One worker as `WORKERS_SQL` reads it. */
export interface WorkerRow {
  workerId: string;
  /** The kinds its presence row lists; null when it has no row. */
  kinds: string[] | null;
  /** The versions of each kind it serves (`{ order: [2, 1] }`); null when it has no row. */
  versions: Record<string, number[]> | null;
  startedAt: Date | null;
  seenAt: Date | null;
  expiresAt: Date | null;
  /** Its presence row is renewed (not expired). */
  live: boolean;
  /** The runs it holds now (status running). */
  running: number;
}

/** The workers' presence rows (`ai_workers`), one statement each. Never on a run's path. @internal */
@Injectable()
export class WorkerPresenceStore {
  constructor(private readonly db: DurableDatabase) {}

  async beat(
    workerId: string,
    kinds: string[],
    ttlMs: number,
    versions: Record<string, number[]> = {},
    handoff: { kinds: string[]; leaseMs: number; first?: boolean } = { kinds: [], leaseMs: 0 },
  ): Promise<void> {
    await this.db.query(WORKER_BEAT_SQL, [
      workerId,
      kinds,
      ttlMs,
      JSON.stringify(versions),
      handoff.kinds,
      handoff.leaseMs || null,
      !!handoff.first,
    ]);
  }

  async leave(workerId: string): Promise<void> {
    await this.db.query(WORKER_LEAVE_SQL, [workerId]);
  }

  async list(): Promise<WorkerRow[]> {
    const { rows } = await this.db.query<{
      worker_id: string;
      kinds: string[] | null;
      versions: Record<string, number[]> | null;
      started_at: Date | null;
      seen_at: Date | null;
      expires_at: Date | null;
      live: boolean;
      running: number;
    }>(WORKERS_SQL, []);
    return rows.map((r) => ({
      workerId: r.worker_id,
      kinds: r.kinds,
      versions: r.versions,
      startedAt: r.started_at,
      seenAt: r.seen_at,
      expiresAt: r.expires_at,
      live: r.live,
      running: r.running,
    }));
  }

  /** Whether some worker declared a per-key limit (a concurrency or rate limit by key) for `kind`. */
  async keyed(kind: string): Promise<boolean> {
    const { rows } = await this.db.query<{ keyed: boolean }>(KIND_KEYED_SQL, [kind]);
    return rows[0].keyed;
  }

  async served(kind: string): Promise<boolean> {
    const { rows } = await this.db.query<{ served: boolean }>(KIND_SERVED_SQL, [kind]);
    return rows[0].served;
  }
}
