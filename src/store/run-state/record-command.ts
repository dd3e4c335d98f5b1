import type { RunCursor } from '../../interfaces/run.interface';
import { eventPayload } from '../event-payload';
import { extendLeaseBy, Fence, fencedRun, runFenced, StoreContext } from './fence';
import type { SqlText } from '../durable-names';

/**
 * Record a command's outcome with its checkpoint, fenced, in one statement: command row settled,
 * checkpoint (index → {status, result|error}), cursor `done`, attempts reset, one event.
 * $1 id, $2 worker, $3 epoch, $4 cursor, $5 ttl ms, $6 key, $7 status, $8 result, $9 error,
 * $10 checkpoint output, $11 step index, $12 step name, $13 event type, $14 event payload, $15 resolution,
 * $16 delivery order (seq), $17 call fingerprint
 */
export const RECORD_COMMAND_SQL: SqlText = (t) => `
${fencedRun(t, `cursor = $4::jsonb, attempts = 0, ${extendLeaseBy('$5')}, updated_at = now()`)}, cmd as (
  update ${t.commands} c
     set status = $7, result = $8::jsonb, error = $9::jsonb, resolution = coalesce($15, c.resolution), updated_at = now()
    from run
   where c.idempotency_key = $6 and c.run_id = run.id
), cp as (
  insert into ${t.checkpoints} (run_id, step_index, step_name, output, attempt, epoch, seq, fingerprint)
  select run.id, $11, $12, $10::jsonb, 0, run.epoch, $16, $17 from run
), ev as (
  insert into ${t.events} (run_id, event_type, epoch, payload)
  select run.id, $13, run.epoch, $14::jsonb from run
)
select cancel_requested from run`;

/** A command's outcome with its checkpoint (step `name` at `index`, delivered as `seq`) and event. */
export interface CommandOutcomeWrite {
  key: string;
  status: 'succeeded' | 'failed' | 'rejected';
  resultJson: string | null;
  error: Record<string, unknown> | null;
  index: number;
  name: string;
  event: string;
  payload: Record<string, unknown>;
  resolution?: string | null;
  seq: number;
  fingerprint: string | null;
}

/** Records a command's outcome (fenced): the row settled, its checkpoint, the cursor `done`. */
export async function recordCommand(
  s: StoreContext,
  f: Fence,
  cursor: RunCursor,
  w: CommandOutcomeWrite,
): Promise<{ cancelRequested: boolean }> {
  const output =
    w.status === 'succeeded'
      ? `{"status":"succeeded","result":${w.resultJson ?? 'null'}}`
      : JSON.stringify({ status: w.status, error: w.error });
  const row = await runFenced<{ cancel_requested: boolean }>(
    s,
    f,
    `record of command ${w.key}`,
    RECORD_COMMAND_SQL,
    [
      JSON.stringify(cursor),
      s.options.worker.leaseTtlMs,
      w.key,
      w.status,
      w.resultJson,
      w.error ? JSON.stringify(w.error) : null,
      output,
      w.index,
      w.name,
      w.event,
      eventPayload(s.options, w.event, w.payload),
      w.resolution ?? null,
      w.seq,
      w.fingerprint,
    ],
    'dx_record_command',
  );
  return { cancelRequested: row.cancel_requested };
}
