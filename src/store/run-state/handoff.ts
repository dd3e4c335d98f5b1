import type { SqlText } from '../durable-names';
import { CLAIMED_COLUMNS } from './claim-candidates';
import { ClaimedRun, toClaimed } from './claim-runs';
import type { StoreContext } from './fence';
import { handoffUnbegun } from './handoff-offer';

/**
 * A run a start handed to this worker (START_RUN_SQL), as a claim returns it: a read, no write and no
 * commit to wait for. Only while the run is still this worker's hand-off (running, epoch 1, its worker);
 * `lease_ms`, what is left of its hand-off lease by the database clock.
 * $1 run id, $2 worker id
 */
export const HANDOFF_READ_SQL: SqlText = (t) => `
select ${CLAIMED_COLUMNS}, false as taken_over,
       greatest(0, extract(epoch from r.lease_expires_at - now()) * 1000)::float8 as lease_ms
  from ${t.runs} r
 where r.id = $1 and r.worker_id = $2 and r.status = 'running' and r.epoch = 1`;

/**
 * A worker that stops offers no slot any more: once this commits, no start hands it a run. $1 worker id
 */
export const HANDOFF_WITHDRAW_SQL: SqlText = (t) =>
  `update ${t.workers} set handoff_slots = 0, handoff_runs = '{}' where worker_id = $1 and handoff_slots > 0`;

/**
 * A stopping worker hands back the runs starts handed it that it has not begun (not among $2, the runs
 * it drives or is reading): pending again and due now, their attempt given back, fenced (this worker,
 * epoch 1, nothing written since the start: its lease still the hand-off's), a `run.released` event each
 * (reason `handoff`), and a NOTIFY of their kind wakes the other workers. Sent after
 * HANDOFF_WITHDRAW_SQL has committed, so its snapshot holds every run handed to this worker.
 * $1 worker id, $2 run ids it keeps, $3 wake channel
 */
export const HANDOFF_RETURN_SQL: SqlText = (t) => `
with back as (
  update ${t.runs} r
     set status = 'pending', worker_id = null, lease_expires_at = null, attempts = r.attempts - 1,
         available_at = now(), updated_at = now()
   where r.worker_id = $1 and r.status = 'running' and ${handoffUnbegun('r')} and r.id <> all($2::uuid[])
  returning r.id, r.kind, r.epoch
), ev as (
  insert into ${t.events} (run_id, event_type, epoch, payload)
  select id, 'run.released', epoch,
         jsonb_build_object('reason', 'handoff', 'workerId', $1::text, 'atStepBoundary', true)
    from back
)
select count(pg_notify($3, kind))::int as returned from back`;

/**
 * The run `runId` as handed to `workerId` (HANDOFF_READ_SQL), with its hand-off lease; null when it
 * is not this worker's hand-off any more (handed back, taken back after its lease, cancelled).
 */
export async function readHandoff(
  s: StoreContext,
  runId: string,
  workerId: string,
): Promise<ClaimedRun | null> {
  const sentAt = performance.now();
  const { rows } = await s.db.query(HANDOFF_READ_SQL, [runId, workerId], 'dx_handoff_read');
  if (!rows.length) return null;
  return { ...toClaimed(rows[0], sentAt), leaseMs: Number(rows[0].lease_ms) };
}

/** Withdraws every slot the worker offers (HANDOFF_WITHDRAW_SQL). */
export async function withdrawHandoff(s: StoreContext, workerId: string): Promise<void> {
  await s.db.query(HANDOFF_WITHDRAW_SQL, [workerId], 'dx_handoff_withdraw');
}

/** Hands back the runs handed to `workerId` and not begun, except `keep` (HANDOFF_RETURN_SQL); how many. */
export async function returnHandoffs(s: StoreContext, workerId: string, keep: string[]): Promise<number> {
  const { rows } = await s.db.query(
    HANDOFF_RETURN_SQL,
    [workerId, keep, s.db.names.wakeChannel],
    'dx_handoff_return',
  );
  return rows[0].returned;
}
