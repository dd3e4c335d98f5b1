import type { RunStatus } from '../../interfaces/run.interface';
import type { SqlText } from '../durable-names';

/**
 * Store a signal durably and wake the run if it is waiting (a signal sent before the wait is kept for
 * it). A running run's row is touched too, so a wait parking at this moment sees that its row changed
 * and stays due (WAIT_FOR_SIGNAL_SQL). One event (with who sent it, when known); NOTIFY at commit
 * wakes an idle worker.
 *
 * The run's mailbox is bounded: a signal is stored only while the run holds fewer than $7 pending
 * signals (not consumed by a wait) and fewer than $8 of this name. The count is race-free without a
 * second statement: every stored signal touches the run's row (pending runs too), and the row is
 * locked FOR UPDATE; a sender that waited for that lock (or found the row changed) sees the newer row
 * version through the lock while its count still reads the statement's older snapshot, so when the
 * row's version under the lock (`cur.v`) is not the one of the snapshot (`snap.v`) it stores nothing and
 * answers `moved`: the caller sends the statement again, with a snapshot that counts the other's signal.
 * $1 run id, $2 name, $3 payload, $4 channel, $5 sent by (null: not recorded), $6 the run's kind as the
 * sender expects it (null: any; another kind stores nothing), $7 pending signals allowed per run, $8 per name
 */
export const SEND_SIGNAL_SQL: SqlText = (t) => `
with snap as (
  select xmin::text as v from ${t.runs} where id = $1
), cur as (
  select id, status, kind, epoch, xmin::text as v from ${t.runs} where id = $1 for update
), pend as (
  select count(*)::int as total, count(*) filter (where name = $2)::int as named
    from ${t.signals} where run_id = $1 and consumed_at is null
), ins as (
  insert into ${t.signals} (run_id, name, payload)
  select cur.id, $2, $3::jsonb from cur, snap, pend
   where cur.status in ('pending', 'running', 'waiting') and cur.kind = coalesce($6::text, cur.kind)
     and cur.v = snap.v and pend.total < $7::int and pend.named < $8::int
  returning id
), wake as (
  update ${t.runs} r set available_at = case when cur.status = 'waiting' then now() else r.available_at end,
         updated_at = now()
    from cur where r.id = cur.id and exists (select 1 from ins)
  returning r.id, r.kind, cur.status
), ev as (
  insert into ${t.events} (run_id, event_type, epoch, payload)
  select cur.id, 'signal.sent', cur.epoch, jsonb_strip_nulls(jsonb_build_object('name', $2::text, 'by', $5::text))
    from cur, ins
)
select cur.status, cur.kind, (select count(*) from ins)::int as stored,
       cur.v is distinct from snap.v as moved, pend.total as pending, pend.named as pending_named,
       (select count(pg_notify($4, kind)) from wake where wake.status = 'waiting')::int as woke,
       -- A running run's worker learns at once (its pending waits settle: WaitBoard).
       (select count(pg_notify($4, '$signal:' || wake.id)) from wake where wake.status = 'running')::int as told
  from cur left join snap on true, pend`;

/** A signal to store (SEND_SIGNAL_SQL): for a live run of `kind` (null: any), within the mailbox's caps. */
export interface SignalToSend {
  id: string;
  name: string;
  payloadJson: string;
  by: string | null;
  kind: string | null;
  /** Pending signals the run may hold, in all and of one name. */
  perRun: number;
  perName: number;
}

/**
 * What SEND_SIGNAL_SQL did: the run's status and kind, whether the signal was stored, the run's pending
 * signals before it (in all, of this name), and `moved` when the count may have missed a concurrent
 * send (nothing stored: send again).
 */
export interface SignalSent {
  status: RunStatus;
  kind: string;
  stored: boolean;
  moved: boolean;
  pending: number;
  pendingNamed: number;
}

/** $1 … $8 of SEND_SIGNAL_SQL. */
export const signalParams = (s: SignalToSend, channel: string): unknown[] => [
  s.id,
  s.name,
  s.payloadJson,
  channel,
  s.by,
  s.kind,
  s.perRun,
  s.perName,
];

/** Its answer row, read. */
export const signalSent = (r: Record<string, any>): SignalSent => ({
  status: r.status,
  kind: r.kind,
  stored: r.stored > 0,
  moved: r.moved,
  pending: r.pending,
  pendingNamed: r.pending_named,
});
