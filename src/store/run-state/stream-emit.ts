import type { SqlText } from '../durable-names';
import { CheckpointWrite, fencedRun, insertRecords, recordset, runFenced, StoreContext } from './fence';
import type { Fence } from './fence';

/**
 * `ctx.emit`, fenced, in ONE statement: the run's `stream_seq` moves on by one (its row lock orders
 * every entry of the run, whatever writes them at once), the entry is inserted at that seq with the
 * claim's epoch, and a NOTIFY on the stream channel names the run. From the workflow body the emit is
 * also recorded at its index (`$emit:<topic>`, delivered in order like a step's result: a replay finds
 * it and writes nothing, so no entry is ever written twice); from a step's body the entry carries the
 * step and its attempt instead (a later attempt of a step that was cut off writes its own entries).
 * A stale worker matches no row and writes nothing.
 * $1 id, $2 worker, $3 epoch, $4 topic, $5 data, $6 record index (body) or null, $7 record name,
 * $8 seq of the record, $9 step index (in a step), $10 step attempt, $11 recorded values, $12 channel
 */
export const EMIT_SQL: SqlText = (t) => `
${fencedRun(t, `stream_seq = stream_seq + 1`, 'id, epoch, stream_seq, cancel_requested_at is not null as cancel_requested')}, ${insertRecords(t, '$11')}, mark as (
  insert into ${t.checkpoints} (run_id, step_index, step_name, output, attempt, epoch, seq)
  select run.id, $6, $7, jsonb_build_object('seq', run.stream_seq), 0, run.epoch, $8 from run where $6::int is not null
  on conflict (run_id, step_index) do nothing
), entry as (
  insert into ${t.stream} (run_id, seq, topic, data, epoch, step_index, attempt)
  select run.id, run.stream_seq, $4, $5::jsonb, run.epoch, $9, $10 from run
)
select run.stream_seq as seq, run.cancel_requested, (select count(pg_notify($12, id::text)) from run) as notified
  from run`;

/** One entry to append to the run's stream. */
export interface StreamWrite {
  topic: string;
  dataJson: string;
  /** From the workflow body: the record of the emit (its index, `$emit:<topic>`, delivery seq). */
  record?: { index: number; name: string; seq: number };
  /** From a step's body: the step and its attempt. */
  step?: { index: number; attempt: number };
  records: CheckpointWrite[];
}

/** Appends an entry to the run's stream (see EMIT_SQL): its seq, or LeaseLostError. */
export async function emitEntry(
  s: StoreContext,
  f: Fence,
  w: StreamWrite,
): Promise<{ seq: number; cancelRequested: boolean }> {
  const row = await runFenced<{ seq: number; cancel_requested: boolean }>(
    s,
    f,
    `ctx.emit('${w.topic}')`,
    EMIT_SQL,
    [
      w.topic,
      w.dataJson,
      w.record?.index ?? null,
      w.record?.name ?? null,
      w.record?.seq ?? null,
      w.step?.index ?? null,
      w.step?.attempt ?? null,
      recordset(w.records),
      s.db.names.streamChannel,
    ],
    'dx_emit',
  );
  return { seq: row.seq, cancelRequested: row.cancel_requested };
}
