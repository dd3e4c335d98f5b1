import type { RunCursor } from '../../interfaces/run.interface';
import { decodeStored } from '../../util/codec';
import type { Fence, StoreContext } from './fence';
import type { SqlText } from '../durable-names';
import { CLAIM_TIMELINE, CLAIMED_COLUMNS, dueCandidates, PIN_VERSION, TAKEN_OVER } from './claim-candidates';
import { CLAIM_LIMITED_SQL } from './claim-limited';
import { CLAIM_FETCH, CLAIM_LIMIT, OFFER_COLUMNS, offerLock, offerUpdate } from './handoff-offer';

/**
 * Claim up to $3 due runs of the kinds this worker knows, in one statement. SKIP LOCKED lets many
 * workers claim concurrently without waiting on each other; the partial index ai_runs_claim_idx
 * holds only pending/waiting rows, so the cost stays flat as terminal history grows. Every claim
 * raises the epoch (fencing token) and attempts; lease expiry comes from the database clock.
 * Runs this process still drives ($5) are never claimed again by it: a stale attempt of its own (a
 * database outage longer than the lease, a retry() while a call hangs) must end first.
 * The same statement withdraws and offers the worker's hand-off slots (handoff-offer.ts): it takes
 * up to $3 runs plus the slots it withdraws, and says what it offers now and which runs starts handed the
 * worker meanwhile (one row with a null id when it claimed nothing).
 * $1 worker id, $2 kinds, $3 limit, $4 lease ttl ms, $5 run ids in flight in this process,
 * $6, $7 the (kind, version) pairs the worker registers (null: any version), $8, $9, $10 the hand-off's
 */
export const CLAIM_RUNS_SQL: SqlText = (t) => `
with ${offerLock(t)}, c as (
  -- The candidate scan locks at most $3 + $9 (a constant in a custom plan); the first CLAIM_LIMIT are claimed.
  select id from (${dueCandidates(t, 'id', false, CLAIM_FETCH)}) d
   limit ${CLAIM_LIMIT}
), r as (
  update ${t.runs} r
     set status = 'running', worker_id = $1, epoch = r.epoch + 1, attempts = r.attempts + 1,
         lease_expires_at = now() + $4 * interval '1 millisecond', updated_at = now(),
         ${PIN_VERSION}, ${CLAIM_TIMELINE}
    from c
   where r.id = c.id
  returning ${CLAIMED_COLUMNS}, ${TAKEN_OVER(t)}
), ev as (
  insert into ${t.events} (run_id, event_type, epoch, payload)
  select id, 'run.claimed', epoch, jsonb_build_object('workerId', $1::text, 'attempt', attempts, 'timeline', timeline)
    from r
), ${offerUpdate(t, 'select count(*) from c')}
select r.*, x.offered, x.handed from (select ${OFFER_COLUMNS}) x left join r on true`;

/** A run this worker just claimed. */
export interface ClaimedRun {
  id: string;
  kind: string;
  /** The version of its kind the run is pinned to (null: claimed without versions, read as 1). */
  version: number | null;
  input: unknown;
  epoch: number;
  /** How many times the run continued as new (`ctx.continueAsNew`): its keys name it when above 0. */
  generation: number;
  /** The server's WAL timeline at the claim: (timeline, epoch) is the claim's fencing token. */
  timeline: number;
  /**
   * The run was created or last claimed on another timeline (a failover since): each command it has no
   * row for is settled by its in-doubt policy before its first send (its reserve may have been lost).
   */
  lookupFirst: boolean;
  /** A fork that keeps its original's keys: the key prefix its commands send under (`run_<original>…`). */
  keysFrom?: string | null;
  cursor: RunCursor;
  attempts: number;
  maxAttempts: number;
  cancelRequested: boolean;
  cancelReason: string | null;
  /** The claim before this one lost its lease (a crash, a freeze past the lease, a worker released). */
  takenOver?: boolean;
  /** The database clock at claim time (sleeps and signal timeouts compare against it). */
  dbNow: Date;
  /** `performance.now()` when the claim was sent: the lease runs at least `leaseTtlMs` from there. */
  sentAt: number;
  /** A run a start handed to this worker: its lease from `sentAt` (the hand-off's, shorter than `leaseTtlMs`). */
  leaseMs?: number;
}

/** What one claim statement did. */
export interface ClaimBatch {
  runs: ClaimedRun[];
  /** Due runs it held back because a concurrency limit was full (they left the claim index). */
  heldBack: number;
  /** The hand-off slots the worker's row offers now (0: none, or no row). */
  offered: number;
  /** Runs starts handed the worker since its row was last read (only read when it had slots reserved). */
  handed: string[];
}

/** The hand-off's part of a claim (handoff-offer.ts). */
export interface ClaimOffer {
  /** Slots the worker may offer (0: none). */
  offer: number;
  /** Slots it keeps reserved now: offered, or taken by a start it has not begun. */
  reserved: number;
  /** This worker process's token. */
  token: number;
}

/** A claimed (or handed) run's row as its worker's driver takes it; `sentAt` when its statement was sent. */
export const toClaimed = (r: Record<string, any>, sentAt: number): ClaimedRun => ({
  id: r.id,
  kind: r.kind,
  version: r.kind_version,
  input: decodeStored(r.input),
  epoch: Number(r.epoch),
  generation: r.generation,
  timeline: r.timeline,
  lookupFirst: r.lookup_first,
  keysFrom: r.keys_from ?? null,
  cursor: decodeStored(r.cursor),
  attempts: r.attempts,
  maxAttempts: r.max_attempts,
  cancelRequested: r.cancel_requested,
  cancelReason: r.cancel_reason,
  takenOver: r.taken_over === true,
  dbNow: r.db_now,
  sentAt,
});

/**
 * Claims up to `limit` due runs of `kinds` for `workerId` (SKIP LOCKED; raises epoch and attempts),
 * never one of `exclude` (runs this process still drives, e.g. a stale attempt stuck in a call).
 * `limited`: one of the kinds has a concurrency limit, so the claim takes slots (CLAIM_LIMITED_SQL).
 * `versions`: the (kind, version) pairs the worker registers; it claims runs pinned to one of them or
 * not pinned yet (and pins those to its newest version of their kind). Without: any version.
 * `handoff`: the worker's hand-off slots (the claim withdraws those reserved and offers anew); sent
 * with no room for a run of its own too, when slots are reserved (they may be withdrawn).
 */
export async function claimRuns(
  s: StoreContext,
  workerId: string,
  kinds: string[],
  limit: number,
  exclude: string[] = [],
  limited = false,
  versions?: { kinds: string[]; versions: number[] },
  handoff: ClaimOffer = { offer: 0, reserved: 0, token: 0 },
): Promise<ClaimBatch> {
  if ((limit <= 0 && handoff.reserved <= 0) || kinds.length === 0)
    return { runs: [], heldBack: 0, offered: handoff.reserved, handed: [] };
  const sentAt = performance.now();
  const { rows } = await s.db.query(
    limited ? CLAIM_LIMITED_SQL : CLAIM_RUNS_SQL,
    [
      workerId,
      kinds,
      Math.max(0, limit),
      s.options.worker.leaseTtlMs,
      exclude,
      versions?.kinds ?? null,
      versions?.versions ?? null,
      handoff.offer,
      handoff.reserved,
      handoff.token,
    ],
    limited ? 'dx_claim_limited' : 'dx_claim',
  );
  const heldBack = limited ? Number(rows[0]?.held_back ?? 0) : 0;
  const runs = rows.filter((r) => r.id != null).map((r) => toClaimed(r, sentAt));
  return { runs, heldBack, offered: rows[0]?.offered ?? 0, handed: rows[0]?.handed ?? [] };
}

/** The fence of a claim: what every fenced write of its attempt carries. */
export const fenceOf = (c: ClaimedRun, workerId: string): Fence => ({
  runId: c.id,
  workerId,
  epoch: c.epoch,
  generation: c.generation,
  timeline: c.timeline,
  lookupFirst: c.lookupFirst,
  keysFrom: c.keysFrom ?? null,
});
