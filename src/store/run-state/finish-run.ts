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
import type { DurableNames, SqlText } from '../durable-names';
import { closeUnsentCommands } from '../sql/close-unsent.sql';
import { releaseSlots } from './slots';
import type { BatchItem } from './fenced-batcher';

/**
 * A finish's values as SQL expressions: `$4`.. in the statement of one run, the input row's columns
 * in FINISH_BATCH_SQL. `u` is read inside the run's UPDATE, `r` in the CTEs after it (through `run`).
 * @internal
 */
export interface FinishExprs {
  status: string;
  output: string;
  error: string;
  delay: string;
  attemptsDelta: string;
  records: string;
  event: string;
  payload: string;
  parked: string;
  unsent: string;
  cleansUp: string;
  stepCursor: string;
  stepPayload: string;
}

/**
 * A success that a cancel request beat: decided on the row's newest version in the finish's own
 * statement (a cancel committed between the last step's commit and the finish still wins), so a run
 * whose cancel was requested never ends `succeeded`. It ends `cancelled`, or, when its workflow has
 * `onCancel` (`cleansUp`), stays `running` under this claim, which goes on to the cleanup.
 */
const cancelWins = (u: FinishExprs) => `(${u.status} = 'succeeded' and cancel_requested_at is not null)`;
/** The error a cancel that beat the finish stores: RunCancelledError's, with the request's reason. */
const CANCELLED_ERROR = `jsonb_build_object('name', 'RunCancelledError', 'code', 'DURABLE_RUN_CANCELLED',
           'message', 'Run ' || id || ' was cancelled' || coalesce(': ' || cancel_reason, '') || '.')`;

/** The SET of a finish's UPDATE of its run. */
export function finishSet(u: FinishExprs): string {
  const wins = cancelWins(u);
  return `status = case when ${wins} then (case when ${u.cleansUp} then 'running' else 'cancelled' end) else ${u.status} end,
         output = case when ${wins} then output else coalesce(${u.output}, output) end,
         error = case when ${wins} and ${u.cleansUp} then error
                      when ${wins} then ${CANCELLED_ERROR}
                      else ${u.error} end,
         worker_id = case when ${wins} and ${u.cleansUp} then worker_id end,
         lease_expires_at = case when ${wins} and ${u.cleansUp} then lease_expires_at end,
         available_at = case when ${u.status} <> 'waiting' then available_at
                             when ${u.delay} = -2 then 'infinity'
                             when ${u.delay} < 0 then greatest(now(), lease_expires_at)
                             else now() + ${u.delay} * interval '1 millisecond' end,
         cursor = coalesce(${u.stepCursor}, cursor),
         attempts = greatest(case when ${u.stepCursor} is null then attempts else 0 end + ${u.attemptsDelta}, 0),
         parked_reason = case when ${wins} and ${u.cleansUp} then parked_reason else ${u.parked} end,
         finished_at = case when ${wins} and ${u.cleansUp} then null
                            when ${wins} or ${u.status} in ('succeeded', 'failed', 'cancelled', 'dead_lettered') then now() end,
         updated_at = now()`;
}

/** The columns of the run row a finish returns as CTE `run` (the batch adds its input's). */
export const FINISH_RETURNING =
  'id, epoch, kind, available_at, notify_on_finish, stream_seq, status, cancel_reason';

/**
 * A finish after its CTE `run` (`runCte`, the fenced UPDATE): slots, the values and the fused step's
 * checkpoint, commands left in doubt or withdrawn, the events, the NOTIFYs. `channel` the wake channel.
 */
export function finishAfterRun(t: DurableNames, runCte: string, r: FinishExprs, channel: string): string {
  return `${runCte}, ${releaseSlots(t, "(select id, epoch from run where status <> 'running')")}, ${insertRecords(t, r.records, '0', 'cp', r.stepPayload)}, doubt as (
  -- A cancelled run may leave a reserved command with no outcome: list it as in doubt on the run.
  update ${t.commands} c set status = 'in_doubt', updated_at = now()
    from run where c.run_id = run.id and c.status = 'pending' and run.status = 'cancelled'
     and c.idempotency_key <> all(${r.unsent})
), ${closeUnsentCommands(t, "run.status = 'cancelled'", 'run')}, unsent as (
  -- Reserved in this claim but never sent (the run stopped between its reserve and its call): no
  -- doubt about it, the reservation is withdrawn (a later claim reserves it again).
  delete from ${t.commands} c using run
   where c.run_id = run.id and c.status = 'pending' and c.idempotency_key = any(${r.unsent})
), ev as (
  -- The run's own event (a fused step's is in its checkpoint row: insertRecords). Reading cp makes the
  -- checkpoints go first: the step's event id is drawn before the run's.
  insert into ${t.events} (run_id, event_type, epoch, payload)
  select run.id,
         case when run.status = 'cancelled' and ${r.status} <> 'cancelled' then 'run.cancelled' else ${r.event} end,
         run.epoch,
         case when run.status = 'cancelled' and ${r.status} <> 'cancelled'
              then jsonb_build_object('by', 'worker', 'reason', run.cancel_reason) else ${r.payload} end
    from run
   where run.status <> 'running' and (select count(*) from cp) >= 0
)
select id, status,
       (select count(pg_notify(${channel}, run.kind)) from run where ${r.status} = 'waiting' and ${r.delay} = 0) as woke,
       (select count(pg_notify('${t.doneChannel}', run.id::text)) from run
         where run.notify_on_finish and run.status not in ('waiting', 'running')) as announced,
       -- Watchers of its stream (RunRepository.watch) learn at once that it ended.
       (select count(pg_notify('${t.streamChannel}', run.id::text)) from run
         where run.stream_seq > 0 and run.status not in ('waiting', 'running')) as streamed
  from run`;
}

const ONE: FinishExprs = {
  status: '$4',
  output: '$5::jsonb',
  error: '$6::jsonb',
  delay: '$7',
  attemptsDelta: '$8',
  records: '$9',
  event: '$10',
  payload: '$11::jsonb',
  parked: '$12',
  unsent: '$14::text[]',
  cleansUp: '$15',
  stepCursor: '$16::jsonb',
  stepPayload: '$17::jsonb',
};

/**
 * Leave `running` for good or for a while, fenced: terminal (succeeded/failed/cancelled/dead_lettered)
 * or back to `waiting` with a due time. Owner and lease are cleared in the same UPDATE, values still
 * pending from ctx.now()/uuid() are flushed, and the event is written in the same statement.
 * $1 id, $2 worker, $3 epoch, $4 status, $5 output, $6 error, $7 delay ms (waiting; -1: at the end of
 * the lease being given up, for a run whose call may still act until then; -2: never, held), $8
 * attempts delta,
 * $9 recorded values, $10 event type, $11 event payload, $12 parked reason, $13 channel, $14 keys of
 * commands reserved but never sent, $15 the workflow has `onCancel` (see cancelWins), $16 the cursor of
 * the last step when its commit rides on this statement (else null: the cursor stays), $17 that step's
 * `run.checkpoint_saved` payload (its checkpoint is among $9). Returns the status written.
 * A fused step commit is what STEP_WRITE_SQL would have written (cursor `done`, attempts reset, the
 * checkpoint and its event, before the run's own event), under the same fence, in the same statement.
 */
export const FINISH_RUN_SQL: SqlText = (t) =>
  `
${finishAfterRun(t, fencedRun(t, finishSet(ONE), FINISH_RETURNING), ONE, '$13')}`;

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
  /** Added to the worker's log line of the outcome (what to do about it); not stored. */
  hint?: string;
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
export async function finishRun(
  s: StoreContext & { readonly finishes: { write(item: BatchItem<RunStatus>): Promise<RunStatus> } },
  fence: Fence,
  w: FinishWrite,
): Promise<RunStatus> {
  const error = w.error ? JSON.stringify(w.error) : null;
  const delay = w.delayMs === 'lease-end' ? -1 : w.delayMs === 'never' ? -2 : (w.delayMs ?? 0);
  const records = recordset(w.records ?? []);
  const payload = eventPayload(s.options, w.event, w.payload);
  const unsent = w.unsent ?? [];
  const stepCursor = w.step ? JSON.stringify(w.step.cursor) : null;
  const stepPayload = w.step ? eventPayload(s.options, 'run.checkpoint_saved', w.step.payload) : null;
  const json = (v: unknown) => JSON.stringify(v ?? null);
  // Built now: it reads `w`, which the caller owns.
  const item = `{"in_id":${json(fence.runId)},"in_worker":${json(fence.workerId)},"in_epoch":${fence.epoch},"in_status":${json(w.status)},"in_output":${w.outputJson == null ? 'null' : `{"v":${w.outputJson}}`},"in_error":${error ?? 'null'},"in_delay":${delay},"in_attempts_delta":${w.attemptsDelta ?? 0},"in_records":${records},"in_event":${json(w.event)},"in_payload":${payload},"in_parked":${json(w.parkedReason)},"in_unsent":${json(unsent)},"in_cleans_up":${w.cleansUp ?? false},"in_step_cursor":${stepCursor ?? 'null'},"in_step_payload":${stepPayload ?? 'null'}}`;
  return s.finishes.write({
    runId: fence.runId,
    epoch: fence.epoch,
    during: w.event,
    json: () => item,
    alone: async () => {
      const row = await runFenced<{ status: RunStatus }>(
        s,
        fence,
        w.event,
        FINISH_RUN_SQL,
        [
          w.status,
          w.outputJson ?? null,
          error,
          delay,
          w.attemptsDelta ?? 0,
          records,
          w.event,
          payload,
          w.parkedReason ?? null,
          s.db.names.wakeChannel,
          unsent,
          w.cleansUp ?? false,
          stepCursor,
          stepPayload,
        ],
        'dx_finish',
      );
      return row.status;
    },
  });
}
