import type { DurableNames } from '../durable-names';
import { CURRENT_TIMELINE } from '../sql/timeline.sql';
import { pinnedVersion } from '../sql/pinned-version.sql';
import { claimableFormat } from '../record-format';

/**
 * The due runs a claim may take, in claim order, locked SKIP LOCKED: the conditions of the partial
 * index ai_runs_claim_idx (`status in ('pending', 'waiting') and limited_by is null`: a run held back
 * by a concurrency limit has left it) and the claim's own, among them a record format this release can
 * replay (RECORD_FORMAT: a later release's runs are left to its workers). Both claim statements select through it.
 * Of a kind's runs it takes those not pinned to a version yet (never claimed) and those pinned to a
 * version the worker registers ($6 kinds, $7 versions: the pairs; null: any version).
 * $2 kinds, $5 run ids in flight in this process; `limit`, how many at most (an expression of the
 * parameters: the claims lock up to CLAIM_FETCH, see handoff-offer.ts).
 * `opaque`: each parameter is read through a scalar subquery, which the planner cannot look into, so a
 * plan made for the parameters' values (a custom plan) costs what the generic plan costs, and the plan
 * cache keeps the generic one (see CLAIM_LIMITED_SQL).
 */
export function dueCandidates(t: DurableNames, columns: string, opaque = false, limit = '$3::int'): string {
  const p = (n: number, type: string) => (opaque ? `(select $${n}::${type})::${type}` : `$${n}::${type}`);
  return `select ${columns} from ${t.runs}
   where status in ('pending', 'waiting')
     and limited_by is null
     and available_at <= now()
     and attempts < max_attempts
     and ${claimableFormat()}
     and kind = any(${p(2, 'text[]')})
     and (${p(6, 'text[]')} is null or kind_version is null and epoch = 0
          or (kind, ${pinnedVersion()}) in (select * from unnest(${p(6, 'text[]')}, ${p(7, 'int[]')})))
     and id <> all(${p(5, 'uuid[]')})
   order by priority desc, available_at
   limit ${opaque ? `(select (${limit})::int)` : limit}
   for update skip locked`;
}

/**
 * The version a claim pins a run to: the one it is pinned to, 1 for a run claimed before versions
 * existed (`kind_version` null, epoch above 0), else the newest version of its kind the worker registers
 * ($6, $7). Read on the claimed row (`r`), before the claim raises its epoch.
 */
export const PIN_VERSION = `kind_version = coalesce(${pinnedVersion('r')},
                     (select max(v.n) from unnest($6::text[], $7::int[]) v(k, n) where v.k = r.kind))`;

/**
 * A claim's fencing timeline: the server's now, and `lookup_first` when the run was created or last
 * claimed on another timeline (a failover since: what that claim sent may have no row here any more).
 * Read on the claimed row (`r`), before the claim's update.
 */
export const CLAIM_TIMELINE = `timeline = ${CURRENT_TIMELINE},
         lookup_first = r.lookup_first or coalesce(r.timeline <> ${CURRENT_TIMELINE}, false)`;

/**
 * `taken_over`: the claim before this one ended with its lease taken back (`run.reconciled`: the
 * reconciler found it expired, or `LeaseService.releaseWorker`), read on the claimed row (`r`, at its
 * new epoch) from the run's newest 16 events (ai_events_run_idx, backwards): a resume after a park or a
 * drain costs a bounded probe, a first claim none.
 */
export const TAKEN_OVER = (t: DurableNames): string => `case when r.epoch > 1 then exists (
            select 1 from (select e.event_type, e.epoch from ${t.events} e where e.run_id = r.id
                            order by e.id desc limit 16) x
             where x.event_type = 'run.reconciled' and x.epoch = r.epoch - 1) else false end as taken_over`;

/** The columns both claim statements return for a claimed run. */
export const CLAIMED_COLUMNS = `r.id, r.kind, r.kind_version, r.input, r.epoch, r.generation, r.cursor, r.attempts,
            r.max_attempts, r.cancel_requested_at is not null as cancel_requested, r.cancel_reason, now() as db_now,
            r.timeline, r.lookup_first, r.keys_from`;
