import type { RunCursor } from '../../interfaces/run.interface';
import type { SqlText } from '../durable-names';
import { eventPayload } from '../event-payload';
import {
  CheckpointWrite,
  extendLeaseBy,
  Fence,
  fencedRun,
  insertRecords,
  recordset,
  runFenced,
  StoreContext,
} from './fence';

/**
 * The cleanup phase of a cancelled run (`onCancel`) has a position space of its own, far above any
 * position `run()` reaches: the marker `$cancelled` sits at CLEANUP_BASE, and the cleanup's steps and
 * commands take CLEANUP_BASE + 1 onwards. `run()` replays only what lies below it, `onCancel` only what
 * lies above, so neither phase can shift the other's positions.
 */
export const CLEANUP_BASE = 1_000_000_000;

/**
 * The cleanup of a cancelled run begins (fenced, one statement): the marker checkpoint `$5` at
 * position `$4` holding the run's cancel reason as the row has it, values still pending (`$6`), the
 * cursor, and a `run.cleanup_started` event. A resumed cleanup finds the marker there: `do nothing`.
 * $1 id, $2 worker, $3 epoch, $4 marker index, $5 marker name, $6 records, $7 cursor, $8 ttl ms,
 * $9 event payload
 */
export const CLEANUP_MARK_SQL: SqlText = (t) => `
${fencedRun(t, `cursor = $7::jsonb, ${extendLeaseBy('$8')}, updated_at = now()`, 'id, epoch, cancel_reason')}, marker as (
  insert into ${t.checkpoints} (run_id, step_index, step_name, output, attempt, epoch)
  select run.id, $4, $5, jsonb_build_object('reason', run.cancel_reason), 0, run.epoch from run
  on conflict (run_id, step_index) do nothing
  returning step_index
), ${insertRecords(t, '$6')}, ev as (
  insert into ${t.events} (run_id, event_type, epoch, payload)
  select run.id, 'run.cleanup_started', run.epoch, $9::jsonb from run where exists (select 1 from marker)
)
select id from run`;

/** Writes the cleanup marker of a cancelled run (fenced); LeaseLostError when the claim is gone. */
export async function markCleanup(
  s: StoreContext,
  fence: Fence,
  marker: { index: number; name: string },
  cursor: RunCursor,
  records: CheckpointWrite[],
): Promise<{ id: string }> {
  return runFenced<{ id: string }>(
    s,
    fence,
    'the start of its cleanup',
    CLEANUP_MARK_SQL,
    [
      marker.index,
      marker.name,
      recordset(records),
      JSON.stringify(cursor),
      s.options.worker.leaseTtlMs,
      eventPayload(s.options, 'run.cleanup_started', {}),
    ],
    'dx_cleanup_mark',
  );
}
