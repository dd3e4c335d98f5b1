import type { RunCursor, RunStatus } from '../../interfaces/run.interface';
import { eventPayload } from '../event-payload';
import {
  CheckpointWrite,
  Fence,
  fencedRun,
  insertRecords,
  recordset,
  runFenced,
  StoreContext,
} from './fence';
import type { SqlText } from '../durable-names';
import { closeUnsentCommands } from '../run-control.store';
import { releaseSlots } from './slots';

/**
 * A success that a cancel request beat: decided on the row's newest version in the finish's own
 * statement (a cancel committed between the last step's commit and the finish still wins), so a run
 * whose cancel was requested never ends `succeeded`. It ends `cancelled`, or, when its workflow has
 * `onCancel` ($15), stays `running` under this claim, which goes on to the cleanup.
 */
const CANCEL_WINS = `($4 = 'succeeded' and cancel_requested_at is not null)`;
/** The error a cancel that beat the finish stores: RunCancelledError's, with the request's reason. */
const CANCELLED_ERROR = `jsonb_build_object('name', 'RunCancelledError', 'code', 'DURABLE_RUN_CANCELLED',
           'message', 'Run ' || id || ' was cancelled' || coalesce(': ' || cancel_reason, '') || '.')`;

/**
 * Leave `running` for good or for a while, fenced: terminal (succeeded/failed/cancelled/dead_lettered)
 * or back to `waiting` with a due time. Owner and lease are cleared in the same UPDATE, values still
 * pending from ctx.now()/uuid() are flushed, and the event is written in the same statement.
 * $1 id, $2 worker, $3 epoch, $4 status, $5 output, $6 error, $7 delay ms (waiting; -1: at the end of
 * the lease being given up, for a run whose call may still act until then; -2: never, held), $8
 * attempts delta,
 * $9 recorded values, $10 event type, $11 event payload, $12 parked reason, $13 channel, $14 keys of
 * commands reserved but never sent, $15 the workflow has `onCancel` (see CANCEL_WINS), $16 the cursor of
 * the last step when its commit rides on this statement (else null: the cursor stays), $17 that step's
 * `run.checkpoint_saved` payload (its checkpoint is among $9). Returns the status written.
 * A fused step commit is what STEP_WRITE_SQL would have written (cursor `done`, attempts reset, the
 * checkpoint and its event, before the run's own event), under the same fence, in the same statement.
 */
export const FINISH_RUN_SQL: SqlText = (t) => `
${fencedRun(
  t,
  `status = case when ${CANCEL_WINS} then (case when $15 then 'running' else 'cancelled' end) else $4 end,
         output = case when ${CANCEL_WINS} then output else coalesce($5::jsonb, output) end,
         error = case when ${CANCEL_WINS} and $15 then error
                      when ${CANCEL_WINS} then ${CANCELLED_ERROR}
                      else $6::jsonb end,
         worker_id = case when ${CANCEL_WINS} and $15 then worker_id end,
         lease_expires_at = case when ${CANCEL_WINS} and $15 then lease_expires_at end,
         available_at = case when $4 <> 'waiting' then available_at
                             when $7 = -2 then 'infinity'
                             when $7 < 0 then greatest(now(), lease_expires_at)
                             else now() + $7 * interval '1 millisecond' end,
         cursor = coalesce($16::jsonb, cursor),
         attempts = greatest(case when $16::jsonb is null then attempts else 0 end + $8, 0),
         parked_reason = case when ${CANCEL_WINS} and $15 then parked_reason else $12 end,
         finished_at = case when ${CANCEL_WINS} and $15 then null
                            when ${CANCEL_WINS} or $4 in ('succeeded', 'failed', 'cancelled', 'dead_lettered') then now() end,
         updated_at = now()`,
  'id, epoch, kind, available_at, notify_on_finish, stream_seq, status, cancel_reason',
)}, ${releaseSlots(t, "(select id, epoch from run where status <> 'running')")}, ${insertRecords(t, '$9')}, doubt as (
  -- A cancelled run may leave a reserved command with no outcome: list it as in doubt on the run.
  update ${t.commands} c set status = 'in_doubt', updated_at = now()
    from run where c.run_id = run.id and c.status = 'pending' and run.status = 'cancelled'
     and c.idempotency_key <> all($14::text[])
), ${closeUnsentCommands(t, "run.status = 'cancelled'", 'run')}, unsent as (
  -- Reserved in this claim but never sent (the run stopped between its reserve and its call): no
  -- doubt about it, the reservation is withdrawn (a later claim reserves it again).
  delete from ${t.commands} c using run
   where c.run_id = run.id and c.status = 'pending' and c.idempotency_key = any($14::text[])
), ev as (
  -- The fused step's event first, then the run's own (ids in this order).
  insert into ${t.events} (run_id, event_type, epoch, payload)
  select run.id, e.event_type, run.epoch, e.payload
    from run cross join lateral (
      select 0 as ord, 'run.checkpoint_saved'::text as event_type, $17::jsonb as payload
       where $17::jsonb is not null
      union all
      select 1,
             case when run.status = 'cancelled' and $4 <> 'cancelled' then 'run.cancelled' else $10 end,
             case when run.status = 'cancelled' and $4 <> 'cancelled'
                  then jsonb_build_object('by', 'worker', 'reason', run.cancel_reason) else $11::jsonb end
       where run.status <> 'running'
    ) e
   order by e.ord
)
select id, status,
       (select count(pg_notify($13, run.kind)) from run where $4 = 'waiting' and $7 = 0) as woke,
       (select count(pg_notify('${t.doneChannel}', run.id::text)) from run
         where run.notify_on_finish and run.status not in ('waiting', 'running')) as announced,
       -- Watchers of its stream (RunRepository.watch) learn at once that it ended.
       (select count(pg_notify('${t.streamChannel}', run.id::text)) from run
         where run.stream_seq > 0 and run.status not in ('waiting', 'running')) as streamed
  from run`;

/** A fenced transition out of `running`. */
export interface FinishWrite {
  status: Exclude<RunStatus, 'running' | 'pending'>;
  outputJson?: string | null;
  error?: Record<string, unknown> | null;
  /**
   * Due after this many ms (waiting); `'lease-end'`: when the lease given up would have ended;
   * `'never'`: held until an operator retries it.
   */
  delayMs?: number | 'lease-end' | 'never';
  attemptsDelta?: number;
  records?: CheckpointWrite[];
  event: string;
  payload: Record<string, unknown>;
  parkedReason?: string | null;
  /** Keys of commands reserved in this claim whose call was never made. */
  unsent?: string[];
  /** The workflow has `onCancel`: a success a cancel beat keeps the run `running` for its cleanup. */
  cleansUp?: boolean;
  /** The last step's commit, fused into this statement (its checkpoint is among `records`). */
  step?: { cursor: RunCursor; payload: Record<string, unknown> };
}

/**
 * Leaves `running` (terminal, or `waiting` with a due time), fenced, with its event. Returns the
 * status written: `cancelled` for a success a cancel request beat, `running` when that run cleans up.
 */
export async function finishRun(s: StoreContext, fence: Fence, w: FinishWrite): Promise<RunStatus> {
  const row = await runFenced<{ status: RunStatus }>(
    s,
    fence,
    w.event,
    FINISH_RUN_SQL,
    [
      w.status,
      w.outputJson ?? null,
      w.error ? JSON.stringify(w.error) : null,
      w.delayMs === 'lease-end' ? -1 : w.delayMs === 'never' ? -2 : (w.delayMs ?? 0),
      w.attemptsDelta ?? 0,
      recordset(w.records ?? []),
      w.event,
      eventPayload(s.options, w.event, w.payload),
      w.parkedReason ?? null,
      s.db.names.wakeChannel,
      w.unsent ?? [],
      w.cleansUp ?? false,
      w.step ? JSON.stringify(w.step.cursor) : null,
      w.step ? eventPayload(s.options, 'run.checkpoint_saved', w.step.payload) : null,
    ],
    'dx_finish',
  );
  return row.status;
}
