/**
 * Renew every lease this worker holds in one statement, each fenced by its own epoch. Rows that no
 * longer match (taken over, finished elsewhere) are simply absent from the result: the caller aborts
 * those runs. Also reports cancellation requests.
 * $1 worker, $2 run ids, $3 epochs, $4 ttl ms
 */
export const HEARTBEAT_SQL = `
update ai_runs r
   set lease_expires_at = now() + $4 * interval '1 millisecond'
  from unnest($2::uuid[], $3::bigint[]) as h(id, epoch)
 where r.id = h.id and r.epoch = h.epoch and r.worker_id = $1 and r.status = 'running'
returning r.id, r.cancel_requested_at is not null as cancel_requested`;
