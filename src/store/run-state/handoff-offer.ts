import type { DurableNames } from '../durable-names';

/**
 * The hand-off's side of a claim (CLAIM_RUNS_SQL, CLAIM_LIMITED_SQL): the worker's free capacity offered
 * to starts in its presence row, written by the claim it sends anyway, never by a statement of its own.
 * A start may take an offered slot until the worker's next claim; so a claim takes as many runs as it may
 * (`$3`: concurrency, minus runs in flight, minus the slots reserved) plus the slots still in the row,
 * which it withdraws in the same statement (read under the row's lock, `o`), and then offers anew what
 * it did not fill: none when it found as many due runs as it could take (a queue: runs go to claims in
 * claim order, a start is not handed a slot past them), else all of the rest. It also returns the runs
 * starts handed the worker since the row was last read (`handoff_runs`), heard or not, so a lost NOTIFY
 * costs nothing.
 * $8 slots the worker may offer (0: none: draining, or no kind it takes by hand-off), $9 slots it keeps
 * reserved now (offered, or taken by a start it has not heard of; 0: no lock, the row is not read),
 * $10 its token (a restart under the same worker id does not take its predecessor's hand-offs).
 * @internal
 */
export const offerLock = (t: DurableNames): string => `o as (
  select handoff_slots as slots, handoff_runs as runs from ${t.workers}
   where worker_id = $1 and $9::int > 0
   for update
)`;

/**
 * How many due runs the claim takes: its own limit plus the slots it withdraws (never more than the
 * slots it reserved: the row cannot hold more than this worker offered).
 */
export const CLAIM_LIMIT = `least($3::int + $9::int, $3::int + coalesce((select slots from o), 0))`;

/** How many due runs the candidate scan locks at most (its `limit`, a constant in a custom plan). */
export const CLAIM_FETCH = `$3::int + $9::int`;

/**
 * The CTE `offer`: the worker's row after the claim, `found` being how many due runs the claim found
 * (at most CLAIM_LIMIT). Written only when the worker reserved slots before or offers some now; a claim
 * that does neither ($8 and $9 both 0, most claims) skips it on a one-time filter.
 */
export const offerUpdate = (t: DurableNames, found: string): string => `offer as (
  update ${t.workers} w
     set handoff_slots = case when n.found < n.lim then least($8::int, n.lim - n.found) else 0 end,
         handoff_runs = '{}', handoff_token = $10::int
    from (select (${found})::int as found, ${CLAIM_LIMIT} as lim) n
   where ($9::int > 0 or $8::int > 0) and w.worker_id = $1 and ($9::int > 0 or n.found < n.lim)
  returning w.handoff_slots
)`;

/** The claim's answer about its offer: the slots now offered (null: none), the runs handed meanwhile. */
export const OFFER_COLUMNS = `(select handoff_slots from offer) as offered, (select runs from o) as handed`;

/**
 * A run a start handed to a worker that has not written for it since: no step, no renewal (its lease
 * is still the hand-off's). Its attempt was counted by the start; a lapse gives it back.
 * @internal
 */
export const handoffUnbegun = (alias = ''): string => {
  const a = alias ? `${alias}.` : '';
  return `(${a}epoch = 1 and ${a}lease_expires_at is not distinct from ${a}handoff_expires_at)`;
};
