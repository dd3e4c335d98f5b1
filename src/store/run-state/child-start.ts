import { eventPayload } from '../event-payload';
import type { DurableNames, SqlText } from '../durable-names';
import {
  CheckpointWrite,
  extendLeaseBy,
  Fence,
  FENCE,
  fencedRun,
  generationPart,
  insertRecords,
  recordset,
  runFenced,
  StoreContext,
} from './fence';
import { keyLimitRows } from './slots';
import { seededUuid } from '../sql/seeded-uuid.sql';
import { RECORD_FORMAT } from '../record-format';

/**
 * `ctx.startChild`, fenced, in ONE statement: the parent's row is marked `has_children` (its end then
 * reaches its children) with its lease extended, the child run is inserted (idempotency key
 * `child:<parent>:<step>`, so it exists once whatever happens after), its key's slots and rate tokens
 * are made when missing, and the parent records the start at its step index (`{"runId": …}`, delivered
 * in order like a step's result) with a `child.started` event. A stale parent matches no row and starts
 * nothing. A start counts as progress (`attempts` reset). The child's id is made from its key, and it
 * looks up first when its parent does: a child started again after a failover lost the first start has
 * the same id, so its commands' keys are the same and are settled by policy before a first send.
 * $1 id, $2 worker, $3 epoch, $4 ttl ms, $5 child kind, $6 child input, $7 child key, $8 max attempts,
 * $9 priority, $10 concurrency key, $11 parent close, $12 step index, $13 step name, $14 recorded
 * values, $15 `run.created` payload, $16 seq, $17 fingerprint, $18 channel
 */
export const START_CHILD_SQL: SqlText = (t) => `
${fencedRun(
  t,
  `has_children = true, attempts = 0, ${extendLeaseBy('$4')}, updated_at = now()`,
  'id, epoch, lookup_first, cancel_requested_at is not null as cancel_requested',
)}, ins as (
  insert into ${t.runs} (id, kind, input, idempotency_key, max_attempts, available_at, priority,
                         concurrency_key, parent_id, parent_close, lookup_first, record_format)
  select ${seededUuid('$7')}, $5, $6::jsonb, $7, $8, now(), $9, $10, run.id, $11, run.lookup_first, ${RECORD_FORMAT}
    from run
  on conflict (idempotency_key) do nothing
  returning *
), ${keyLimitRows(t, 'ins')}, created as (
  insert into ${t.events} (run_id, event_type, epoch, payload)
  select id, 'run.created', 0, $15::jsonb || jsonb_build_object('parent', parent_id) from ins
), child as (
  select id from ins
  union all
  select r.id from ${t.runs} r, run
   where r.idempotency_key = $7 and r.parent_id = run.id and not exists (select 1 from ins)
), ${insertRecords(t, '$14')}, started as (
  insert into ${t.checkpoints} (run_id, step_index, step_name, output, attempt, epoch, seq, fingerprint)
  select run.id, $12, $13, jsonb_build_object('runId', child.id), 0, run.epoch, $16, $17 from run, child
  on conflict (run_id, step_index) do nothing
), ev as (
  insert into ${t.events} (run_id, event_type, epoch, payload)
  select run.id, 'child.started', run.epoch, jsonb_build_object('step', $12::int, 'child', child.id, 'kind', $5::text)
    from run, child
)
select (select id from child) as child_id, run.cancel_requested,
       (select count(pg_notify($18, ins.kind)) from ins) as notified
  from run`;

/** A child run to start from the parent's step `index`. */
export interface ChildStart {
  index: number;
  /** The start's checkpoint name (`$child:<kind>`). */
  name: string;
  kind: string;
  inputJson: string;
  maxAttempts: number;
  priority: number;
  concurrencyKey: string | null;
  parentClose: 'cancel' | 'abandon';
  seq: number;
  fingerprint: string | null;
  records: CheckpointWrite[];
}

/** Starts a child run (once: keyed by parent and step) and records it on the parent; see START_CHILD_SQL. */
export async function startChild(
  s: StoreContext,
  f: Fence,
  c: ChildStart,
): Promise<{ childId: string; cancelRequested: boolean }> {
  const row = await runFenced<{ child_id: string | null; cancel_requested: boolean }>(
    s,
    f,
    `start of child run ${c.kind}`,
    START_CHILD_SQL,
    [
      s.options.worker.leaseTtlMs,
      c.kind,
      c.inputJson,
      `child:${f.runId}${generationPart(f.generation)}:${c.index}`,
      c.maxAttempts,
      c.priority,
      c.concurrencyKey,
      c.parentClose,
      c.index,
      c.name,
      recordset(c.records),
      eventPayload(s.options, 'run.created', {
        kind: c.kind,
        idempotencyKey: `child:${f.runId}${generationPart(f.generation)}:${c.index}`,
      }),
      c.seq,
      c.fingerprint,
      s.db.names.wakeChannel,
    ],
    'dx_start_child',
  );
  if (!row.child_id)
    throw new Error(
      `child key child:${f.runId}${generationPart(f.generation)}:${c.index} is held by a run that is not this run's child`,
    );
  return { childId: row.child_id, cancelRequested: row.cancel_requested };
}

/**
 * A timed-out wait for a child cancels the child (at once when it never began, else by a request its
 * worker sees, as a parent's end does), fenced by the parent's claim (a stale
 * parent asks nothing). It reads the parent's row without locking it: a child ending right now locks
 * its own row, then its parent's (the trigger that signals the parent), never the other way round.
 * $1 id, $2 worker, $3 epoch, $4 child id, $5 reason, $6 channel
 */
export const CANCEL_CHILD_SQL: SqlText = (t) => `
with run as (
  select id from ${t.runs} where ${FENCE}
), ${cancelChildren(t, `select c.id from run, ${t.runs} c where c.id = $4 and c.parent_id = run.id`, '$5::text')}
select (select count(*) from c)::int as touched,
       (select count(pg_notify($6, kind)) from c where status <> 'cancelled') as woke,
       (select count(pg_notify('${t.doneChannel}', id::text)) from c where status = 'cancelled' and notify_on_finish) as announced
  from run`;

/**
 * Two CTEs, `c` and `ev`: the child runs `pick` selects (a subquery of ids) that are still going and
 * have no cancel request are cancelled as a parent's end cancels them: at once when they never began
 * (`pending`, epoch 0), else by a request their worker sees (due at once), each with its event
 * (`reason`: an SQL expression, which may read the child's row `c`). `c` returns id, epoch, kind,
 * status, notify_on_finish.
 * @internal
 */
export function cancelChildren(t: DurableNames, pick: string, reason: string): string {
  return `c as (
  update ${t.runs} c
     set status = case when c.status = 'pending' and c.epoch = 0 then 'cancelled' else c.status end,
         finished_at = case when c.status = 'pending' and c.epoch = 0 then now() else c.finished_at end,
         cancel_requested_at = now(),
         cancel_reason = coalesce(c.cancel_reason, ${reason}),
         available_at = case when c.status = 'waiting' then now() else c.available_at end,
         limited_by = null, updated_at = now()
   where c.id in (${pick}) and c.status in ('pending', 'running', 'waiting') and c.cancel_requested_at is null
  returning c.id, c.epoch, c.kind, c.status, c.notify_on_finish, c.parent_id, c.cancel_reason
), ev as (
  insert into ${t.events} (run_id, event_type, epoch, payload)
  select id, case when status = 'cancelled' then 'run.cancelled' else 'run.cancel_requested' end, epoch,
         jsonb_build_object('reason', cancel_reason, 'parent', parent_id)
    from c
)`;
}

/** Requests the cancel of child `childId` (a wait for it timed out); see CANCEL_CHILD_SQL. */
export async function cancelChild(
  s: StoreContext,
  f: Fence,
  childId: string,
  reason: string,
): Promise<{ touched: number }> {
  const row = await runFenced<{ touched: number }>(
    s,
    f,
    'cancel of a child run',
    CANCEL_CHILD_SQL,
    [childId, reason, s.db.names.wakeChannel],
    'dx_cancel_child',
  );
  return { touched: row.touched };
}
