import { Injectable } from '@nestjs/common';
import { DurableDatabase } from './durable-database';
import type { SqlText } from './durable-names';

/**
 * A worker says it is alive and which kinds it serves (one upsert), and forgets the rows of workers
 * dead for a while in the same statement (rows expired more than a day ago: a reader ignores an expired
 * row anyway; the day keeps a crashed worker visible to an operator). $1 worker id, $2 kinds, $3 ttl ms
 */
export const WORKER_BEAT_SQL: SqlText = (t) => `
with gone as (
  delete from ${t.workers} where expires_at < now() - interval '1 day' and worker_id <> $1
)
insert into ${t.workers} (worker_id, kinds, expires_at)
values ($1, $2::text[], now() + make_interval(secs => $3::float8 / 1000))
on conflict (worker_id) do update
   set kinds = excluded.kinds, seen_at = now(), expires_at = excluded.expires_at`;

/** A worker that shuts down removes its row. $1 worker id */
export const WORKER_LEAVE_SQL: SqlText = (t) => `delete from ${t.workers} where worker_id = $1`;

/** Whether a live worker serves kind $1. */
export const KIND_SERVED_SQL: SqlText = (t) =>
  `select exists (select 1 from ${t.workers} where expires_at > now() and $1 = any(kinds)) as served`;

/** The workers' presence rows (`ai_workers`), one statement each. Never on a run's path. @internal */
@Injectable()
export class WorkerPresenceStore {
  constructor(private readonly db: DurableDatabase) {}

  async beat(workerId: string, kinds: string[], ttlMs: number): Promise<void> {
    await this.db.query(WORKER_BEAT_SQL, [workerId, kinds, ttlMs]);
  }

  async leave(workerId: string): Promise<void> {
    await this.db.query(WORKER_LEAVE_SQL, [workerId]);
  }

  async served(kind: string): Promise<boolean> {
    const { rows } = await this.db.query<{ served: boolean }>(KIND_SERVED_SQL, [kind]);
    return rows[0].served;
  }
}
