import type { RunStatus } from '../../interfaces/run.interface';
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
 * Leave `running` for good or for a while, fenced: terminal (succeeded/failed/cancelled/dead_lettered)
 * or back to `waiting` with a due time. Owner and lease are cleared in the same UPDATE, values still
 * pending from ctx.now()/uuid() are flushed, and the event is written in the same statement.
 * $1 id, $2 worker, $3 epoch, $4 status, $5 output, $6 error, $7 delay ms (waiting; -1: at the end of
 * the lease being given up, for a run whose call may still act until then; -2: never, held), $8
 * attempts delta,
 * $9 recorded values, $10 event type, $11 event payload, $12 parked reason, $13 channel, $14 keys of
 * commands reserved but never sent
 */
export const FINISH_RUN_SQL: SqlText = (t) => `
${fencedRun(
  t,
  `status = $4, output = coalesce($5::jsonb, output), error = $6::jsonb,
         worker_id = null, lease_expires_at = null,
         available_at = case when $4 <> 'waiting' then available_at
                             when $7 = -2 then 'infinity'
                             when $7 < 0 then greatest(now(), lease_expires_at)
                             else now() + $7 * interval '1 millisecond' end,
         attempts = greatest(attempts + $8, 0),
         parked_reason = $12,
         finished_at = case when $4 in ('succeeded', 'failed', 'cancelled', 'dead_lettered') then now() end,
         updated_at = now()`,
  'id, epoch, kind, available_at, notify_on_finish, stream_seq',
)}, ${releaseSlots(t, 'run')}, ${insertRecords(t, '$9')}, doubt as (
  -- A cancelled run may leave a reserved command with no outcome: list it as in doubt on the run.
  update ${t.commands} c set status = 'in_doubt', updated_at = now()
    from run where c.run_id = run.id and c.status = 'pending' and $4 = 'cancelled'
     and c.idempotency_key <> all($14::text[])
), ${closeUnsentCommands(t, "$4 = 'cancelled'", 'run')}, unsent as (
  -- Reserved in this claim but never sent (the run stopped between its reserve and its call): no
  -- doubt about it, the reservation is withdrawn (a later claim reserves it again).
  delete from ${t.commands} c using run
   where c.run_id = run.id and c.status = 'pending' and c.idempotency_key = any($14::text[])
), ev as (
  insert into ${t.events} (run_id, event_type, epoch, payload)
  select run.id, $10, run.epoch, $11::jsonb from run
)
select id, (select count(pg_notify($13, run.kind)) from run where $4 = 'waiting' and $7 = 0) as woke,
       (select count(pg_notify('${t.doneChannel}', run.id::text)) from run
         where run.notify_on_finish and $4 <> 'waiting') as announced,
       -- Watchers of its stream (RunRepository.watch) learn at once that it ended.
       (select count(pg_notify('${t.streamChannel}', run.id::text)) from run
         where run.stream_seq > 0 and $4 <> 'waiting') as streamed
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
}

/** Leaves `running` (terminal, or `waiting` with a due time), fenced, with its event. */
export async function finishRun(s: StoreContext, fence: Fence, w: FinishWrite): Promise<void> {
  await runFenced(
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
    ],
    'dx_finish',
  );
}
