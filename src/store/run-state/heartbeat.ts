import { CURRENT_TIMELINE, Fence, StoreContext } from './fence';
import type { SqlText } from '../durable-names';

/**
 * Renew every lease this worker holds in one statement, each fenced by its own epoch. Rows that no
 * longer match (taken over, finished elsewhere) are simply absent from the result: the caller aborts
 * those runs (as after a failover: the claim's timeline is not the server's any more; see FENCE). Also
 * reports cancellation requests, and whether a signal (or a child's end) is stored for the run.
 * $1 worker, $2 run ids, $3 epochs, $4 ttl ms
 */
export const HEARTBEAT_SQL: SqlText = (t) => `
update ${t.runs} r
   set lease_expires_at = now() + $4 * interval '1 millisecond'
  from unnest($2::uuid[], $3::bigint[]) as h(id, epoch)
 where r.id = h.id and r.epoch = h.epoch and r.worker_id = $1 and r.status = 'running'
   and r.timeline = ${CURRENT_TIMELINE}
returning r.id, r.cancel_requested_at is not null as cancel_requested,
          exists (select 1 from ${t.signals} s where s.run_id = r.id and s.consumed_at is null) as has_signals`;

/**
 * Extends the leases of all listed runs in one statement, each fenced by its epoch. Returns the ids
 * still owned (with their cancellation flag); the others were lost.
 */
export async function heartbeat(
  s: StoreContext,
  workerId: string,
  runs: Array<{ id: string; epoch: number }>,
): Promise<Map<string, { cancelRequested: boolean; hasSignals: boolean }>> {
  const out = new Map<string, { cancelRequested: boolean; hasSignals: boolean }>();
  if (!runs.length) return out;
  const { rows } = await s.db.query(
    HEARTBEAT_SQL,
    [workerId, runs.map((r) => r.id), runs.map((r) => r.epoch), s.options.worker.leaseTtlMs],
    'dx_heartbeat',
  );
  for (const r of rows) out.set(r.id, { cancelRequested: r.cancel_requested, hasSignals: r.has_signals });
  return out;
}

/**
 * Renews one lease (fenced): not alive when the run is no longer this claim's. Used before a call
 * leaves the process when the local clock says the lease may be close to its end.
 */
export async function renewLease(
  s: StoreContext,
  fence: Fence,
): Promise<{ alive: boolean; cancelRequested: boolean }> {
  const left = await heartbeat(s, fence.workerId, [{ id: fence.runId, epoch: fence.epoch }]);
  const mine = left.get(fence.runId);
  return { alive: !!mine, cancelRequested: !!mine?.cancelRequested };
}
