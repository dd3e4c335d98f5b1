import { Injectable } from '@nestjs/common';
import type { RunLeaseView, WorkerReleaseResult } from '../interfaces/lease.interface';
import { DurableDatabase } from './durable-database';
import type { SqlText } from './durable-names';
import { handBackCtes } from './expired-leases.store';
import { handoffUnbegun } from './run-state/handoff-offer';

const LEASE_COLUMNS = `id, kind, worker_id, epoch, timeline, lease_expires_at, cursor`;

/** The lease of one run, when a worker holds it. $1 run id */
const HOLDER_SQL: SqlText = (t) =>
  `select ${LEASE_COLUMNS} from ${t.runs} where id = $1 and status = 'running'`;

/** The runs one worker holds (partial index ai_runs_worker_idx), soonest lease end first. $1 worker */
const HELD_BY_SQL: SqlText = (t) =>
  `select ${LEASE_COLUMNS} from ${t.runs} where worker_id = $1 and status = 'running'
    order by lease_expires_at, id`;

/**
 * Releases every run a worker known to be dead holds, in one statement: each row locked and moved out
 * of `running` (so the dead worker's fenced writes, bound to its (worker, epoch), match nothing from
 * here on), its reserved commands `in_doubt`, one `run.reconciled` event each (reason `worker_gone`).
 * A run with nothing in flight (no reserved command, no model/tool step marked started) is due at once
 * (idle workers are woken); one that may still be calling out is due at its old lease deadline, as if
 * the lease had run out: the pod was cut off, and its last call may still reach the target until then.
 * Attempts spent dead-letter the run, as a lease expiry does. $1 worker id
 */
export const RELEASE_WORKER_SQL: SqlText = (t) => `
with live as (
  -- Locked, and whether its worker may still be calling out (a command reserved, a model/tool step started).
  select r.id, r.worker_id, r.lease_expires_at, ${handoffUnbegun('r')} as handoff,
         (r.cursor->>'status' = 'started'
          or exists (select 1 from ${t.commands} c where c.run_id = r.id and c.status = 'pending')) as live
    from ${t.runs} r
   where r.worker_id = $1 and r.status = 'running'
   for update of r
), ${handBackCtes(t, {
  from: 'live',
  availableAt: 'case when s.live then greatest(now(), s.lease_expires_at) else now() end',
  why: 'worker gone',
  reason: 'worker_gone',
  returning: 's.live',
})}
select id, status, available_at, live,
       coalesce((select array_agg(d.idempotency_key::text order by d.idempotency_key) from doubt d where d.run_id = upd.id), '{}') as in_doubt,
       (select count(pg_notify('${t.doneChannel}', u.id::text)) from upd u
         where u.id = upd.id and u.notify_on_finish and u.status = 'dead_lettered') as announced,
       (select count(pg_notify('${t.wakeChannel}', u.kind)) from upd u
         where u.id = upd.id and u.status = 'waiting' and not u.live) as woke
  from upd`;

const toLease = (r: Record<string, any>): RunLeaseView => ({
  runId: r.id,
  kind: r.kind,
  workerId: r.worker_id,
  epoch: Number(r.epoch),
  timeline: r.timeline ?? null,
  leaseExpiresAt: r.lease_expires_at,
  cursor: r.cursor,
});

/** Reads who holds runs, and releases the runs of a worker known dead. @internal */
@Injectable()
export class LeaseHolderStore {
  constructor(private readonly db: DurableDatabase) {}

  async holder(runId: string): Promise<RunLeaseView | null> {
    const { rows } = await this.db.query(HOLDER_SQL, [runId]);
    return rows[0] ? toLease(rows[0]) : null;
  }

  async heldBy(workerId: string): Promise<RunLeaseView[]> {
    return (await this.db.query(HELD_BY_SQL, [workerId])).rows.map(toLease);
  }

  async releaseWorker(workerId: string): Promise<WorkerReleaseResult[]> {
    const { rows } = await this.db.query(RELEASE_WORKER_SQL, [workerId], 'dx_release_worker');
    return rows.map((r) => ({
      runId: r.id,
      status: r.status,
      availableAt: r.available_at,
      callInFlight: r.live,
      inDoubt: r.in_doubt,
    }));
  }
}
