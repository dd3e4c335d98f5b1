import type { RunCursor } from '../../interfaces/run.interface';
import { eventPayload } from '../event-payload';
import {
  CheckpointWrite,
  Fence,
  fencedRun,
  insertRecords,
  recordset,
  extendLeaseBy,
  runFenced,
  StoreContext,
} from './fence';
import type { SqlText } from '../durable-names';
import type { StepWriteBatcher } from './step-batch';

/**
 * The fenced step write: ONE statement, one round trip. Used for the step commit (checkpoint + cursor
 * `done`, $10 = true resets `attempts`, since attempts count claims without progress) and for marking
 * a model/tool step `started` before it runs ($10 = false; $6 then carries values recorded by
 * ctx.now()/uuid()/random(), flushed before anything external can see them).
 * The UPDATE is fenced by (id, worker_id, epoch); the checkpoint and event inserts read from its
 * RETURNING, so when a newer claim has moved the epoch on, nothing at all is written and the caller
 * raises LeaseLostError.
 * $1 id, $2 worker, $3 epoch, $4 cursor, $5 ttl ms, $6 checkpoints [{step_index, step_name, output, meta}],
 * $7 attempt, $8 event type, $9 event payload, $10 progress made
 */
export const STEP_WRITE_SQL: SqlText = (t) => `
${fencedRun(
  t,
  `cursor = $4::jsonb, attempts = case when $10::boolean then 0 else attempts end,
         ${extendLeaseBy('$5')}, updated_at = now()`,
)}, ${insertRecords(t, '$6', '$7')}, ev as (
  insert into ${t.events} (run_id, event_type, epoch, payload)
  select run.id, $8, run.epoch, $9::jsonb from run
)
select cancel_requested from run`;

/**
 * Intra-step progress (ctx.progress): only the cursor moves, fenced. No event: the cursor inside a
 * step is position, not a run transition. $1 id, $2 worker, $3 epoch, $4 cursor, $5 ttl ms
 */
export const PROGRESS_SQL: SqlText = (t) => `
${fencedRun(t, `cursor = $4::jsonb, ${extendLeaseBy('$5')}, updated_at = now()`, 'cancel_requested_at is not null as cancel_requested')}
select cancel_requested from run`;

/**
 * The step write (commit, or `started` mark when `progressMade` is false), through the worker's
 * group commit (StepWriteBatcher): alone when nothing else is being written, else in one statement
 * with other runs' writes. Returns whether cancellation was requested; LeaseLostError when the fence
 * no longer matches.
 */
export async function writeStep(
  s: StoreContext & { readonly steps: StepWriteBatcher },
  fence: Fence,
  cursor: RunCursor,
  checkpoints: CheckpointWrite[],
  event: string,
  payload: Record<string, unknown>,
  progressMade: boolean,
): Promise<{ cancelRequested: boolean }> {
  const cursorJson = JSON.stringify(cursor);
  const records = recordset(checkpoints);
  const payloadJson = eventPayload(s.options, event, payload);
  const during = `${event} of step ${cursor.name}`;
  return s.steps.write({
    runId: fence.runId,
    epoch: fence.epoch,
    during,
    json: `{"id":${JSON.stringify(fence.runId)},"worker_id":${JSON.stringify(fence.workerId)},"epoch":${fence.epoch},"cursor":${cursorJson},"attempt":${cursor.attempt},"event":${JSON.stringify(event)},"payload":${payloadJson},"progress":${progressMade},"records":${records}}`,
    alone: async () => {
      const row = await runFenced<{ cancel_requested: boolean }>(
        s,
        fence,
        during,
        STEP_WRITE_SQL,
        [cursorJson, s.options.worker.leaseTtlMs, records, cursor.attempt, event, payloadJson, progressMade],
        'dx_step_write',
      );
      return { cancelRequested: row.cancel_requested };
    },
  });
}

/** Moves the intra-step cursor (ctx.progress), fenced. */
export async function writeProgress(
  s: StoreContext,
  fence: Fence,
  cursor: RunCursor,
): Promise<{ cancelRequested: boolean }> {
  const row = await runFenced<{ cancel_requested: boolean }>(
    s,
    fence,
    `progress of step ${cursor.name}`,
    PROGRESS_SQL,
    [JSON.stringify(cursor), s.options.worker.leaseTtlMs],
    'dx_progress',
  );
  return { cancelRequested: row.cancel_requested };
}

/**
 * `ctx.setTags`: the run's tags merged with these (a name given again takes the new value), fenced.
 * $1 id, $2 worker, $3 epoch, $4 tags (JSON object)
 */
export const SET_TAGS_SQL: SqlText = (t) => `
${fencedRun(t, `tags = coalesce(tags, '{}'::jsonb) || $4::jsonb, updated_at = now()`)}
select cancel_requested from run`;

/** Merges `tagsJson` into the run's tags, fenced. */
export async function setTags(
  s: StoreContext,
  fence: Fence,
  tagsJson: string,
): Promise<{ cancelRequested: boolean }> {
  const row = await runFenced<{ cancel_requested: boolean }>(
    s,
    fence,
    'ctx.setTags',
    SET_TAGS_SQL,
    [tagsJson],
    'dx_set_tags',
  );
  return { cancelRequested: row.cancel_requested };
}
