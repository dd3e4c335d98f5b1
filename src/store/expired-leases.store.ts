import { Injectable } from '@nestjs/common';
import { DurableDatabase } from './durable-database';
import type { DurableNames, SqlText } from './durable-names';
import { releaseSlots } from './run-state/slots';
import { cancelChildren } from './run-state/child-start';
import { handoffUnbegun } from './run-state/handoff-offer';

/**
 * Return runs whose lease expired to the queue, in batches. Running rows are found through the partial
 * index ai_runs_worker_idx (bounded by total worker concurrency; lease_expires_at is deliberately not
 * indexed so renewals stay HOT updates). SKIP LOCKED: rows an active worker is
 * writing right now are skipped, never waited on, so the sweep is safe on every pod at once. The
 * attempt was counted at claim time; spent attempts dead-letter the run. A run whose worker died did
 * nothing wrong: for its first $4 expiries without progress it is due at once (and idle workers are
 * woken by NOTIFY), so a kill delays it by one lease. Only a run that keeps expiring (a poison run
 * that takes its worker down) backs off, exponentially in the expiries past those, with ±20% jitter,
 * from the database clock. Commands reserved under the dead lease become `in_doubt`. One
 * `run.reconciled` event per run says why and lists them.
 * $1 batch size, $2 backoff base ms, $3 backoff max ms, $4 expiries without backoff
 */
export const RECLAIM_EXPIRED_SQL: SqlText = (t) => `
with expired as (
  select id, worker_id, ${handoffUnbegun()} as handoff from ${t.runs}
   where status = 'running' and lease_expires_at < now()
   order by lease_expires_at
   limit $1
   for update skip locked
), ${handBackCtes(t, {
  from: 'expired',
  availableAt: `case when r.attempts <= $4 then now()
                     else now() + least($3::float8, $2::float8 * 2 ^ (r.attempts - $4 - 1))
                                  * (0.8 + random() * 0.4) * interval '1 millisecond' end`,
  why: 'lease expired',
  reason: 'lease_expired',
})}
select id, status,
       (select count(pg_notify('${t.doneChannel}', u.id::text)) from upd u
         where u.id = upd.id and u.notify_on_finish and u.status = 'dead_lettered') as announced,
       (select count(pg_notify('${t.wakeChannel}', u.kind)) from upd u
         where u.id = upd.id and u.status = 'waiting' and u.attempts <= $4) as woke
  from upd`;

/**
 * The CTEs `upd`, `doubt` and `ev` that hand back the runs of CTE `o.from` (its `id`, `worker_id` and
 * `handoff`, the run's `handoffUnbegun`, aliased `s`) from a lease nobody renews any more: out of
 * `running` (`waiting` due at `o.availableAt`, or dead-lettered when attempts are spent), the commands
 * reserved under it `in_doubt` (the resumed run settles each by its policy before anything else), one
 * `run.reconciled` event each (`o.reason`). A hand-off never begun is due at once with its attempt given
 * back, never dead-lettered, and its event says `handoff: true`; its worker offers no slot any more.
 * Shared by the reconciler (leases expired) and `LeaseService.releaseWorker` (a worker reported gone).
 * @internal
 */
export function handBackCtes(
  t: DurableNames,
  o: { from: string; availableAt: string; why: string; reason: string; returning?: string },
): string {
  // A hand-off its worker never began (handoff-offer.ts): its attempt is given back, it is due at once
  // and never dead-lettered (its worker died or froze before writing anything for it).
  const unbegun = handoffUnbegun('r');
  const spent = `not (${unbegun}) and r.attempts >= r.max_attempts`;
  return `upd as (
  update ${t.runs} r
     set status = case when ${spent} then 'dead_lettered' else 'waiting' end,
         worker_id = null, lease_expires_at = null,
         attempts = r.attempts - case when ${unbegun} then 1 else 0 end,
         available_at = case when ${unbegun} then now() else ${o.availableAt} end,
         parked_reason = case when ${spent}
                              then '${o.why} with attempts exhausted (' || r.attempts || '/' || r.max_attempts || ')' end,
         finished_at = case when ${spent} then now() end,
         updated_at = now()
    from ${o.from} s
   where r.id = s.id
  returning r.id, r.kind, r.epoch, r.status, r.attempts, s.worker_id as previous_worker, r.available_at,
            r.notify_on_finish, s.handoff${o.returning ? `, ${o.returning}` : ''}
), ${releaseSlots(t, 'upd')}, doubt as (
  update ${t.commands} c set status = 'in_doubt', updated_at = now()
    from upd where c.run_id = upd.id and c.status = 'pending'
  returning c.run_id, c.idempotency_key
), stale_offer as (
  -- A worker that let a hand-off lapse unbegun is dead or frozen: starts hand it nothing more (a live
  -- one offers again with its next claim, which reads its row under lock).
  update ${t.workers} wk set handoff_slots = 0
   where wk.worker_id in (select previous_worker from upd where handoff) and wk.handoff_slots > 0
), ev as (
  insert into ${t.events} (run_id, event_type, epoch, payload)
  select id, 'run.reconciled', epoch,
         jsonb_build_object('reason', '${o.reason}', 'previousWorker', previous_worker,
                            'outcome', status, 'attempts', attempts, 'availableAt', available_at,
                            'inDoubt', coalesce((select jsonb_agg(d.idempotency_key) from doubt d where d.run_id = upd.id), '[]'))
         || case when handoff then '{"handoff": true}'::jsonb else '{}'::jsonb end
    from upd
)`;
}

/** Lease expiries without progress after which a reclaimed run backs off (before: due at once). */
export const EXPIRIES_WITHOUT_BACKOFF = 3;

/** A run RECLAIM_EXPIRED_SQL took back from a dead lease, and where it went. */
export interface ReclaimedRun {
  id: string;
  status: 'waiting' | 'dead_lettered';
}

/**
 * The reconciler's safety net for child runs: the `cancel`-policy children of a parent that has ended
 * and that have no cancel request yet (the statement that ended the parent skips a child another
 * statement holds right then) are cancelled as that statement would have done, up to $1 at a time
 * (SKIP LOCKED). $1 batch size, $2 wake channel
 */
export const CANCEL_ORPHANS_SQL: SqlText = (t) => `
with ${cancelChildren(
  t,
  `select k.id from ${t.runs} k join ${t.runs} p on p.id = k.parent_id
    where k.parent_id is not null and k.parent_close = 'cancel' and k.cancel_requested_at is null
      and k.status in ('pending', 'running', 'waiting')
      and p.status in ('succeeded', 'failed', 'cancelled', 'dead_lettered')
    limit $1 for update of k skip locked`,
  `'its parent run ended (' || (select p.status from ${t.runs} p where p.id = c.parent_id) || ')'`,
)}
select (select count(*) from c)::int as cancelled,
       (select count(pg_notify($2, kind)) from c where status <> 'cancelled') as woke,
       (select count(pg_notify('${t.doneChannel}', id::text)) from c where status = 'cancelled' and notify_on_finish) as announced`;

/** The reconciler's statement: runs whose lease expired go back to the queue. @internal */
@Injectable()
export class ExpiredLeaseStore {
  constructor(private readonly db: DurableDatabase) {}

  /** One batch of up to `batchSize` expired leases, requeued with backoff or dead-lettered. */
  async reclaim(batchSize: number, backoffBaseMs: number, backoffMaxMs: number): Promise<ReclaimedRun[]> {
    const { rows } = await this.db.query<ReclaimedRun>(
      RECLAIM_EXPIRED_SQL,
      [batchSize, backoffBaseMs, backoffMaxMs, EXPIRIES_WITHOUT_BACKOFF],
      'dx_reclaim',
    );
    return rows.map((r) => ({ id: r.id, status: r.status }));
  }

  /** Cancels up to `batchSize` children left going by a parent that ended (CANCEL_ORPHANS_SQL). */
  async cancelOrphans(batchSize: number): Promise<number> {
    const { rows } = await this.db.query<{ cancelled: number }>(CANCEL_ORPHANS_SQL, [
      batchSize,
      this.db.names.wakeChannel,
    ]);
    return rows[0].cancelled;
  }
}
