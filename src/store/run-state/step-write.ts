import type { RunCursor } from '../../interfaces/run.interface';
import { eventPayload } from '../event-payload';
import {
  CheckpointWrite,
  Fence,
  fencedRun,
  insertRecords,
  recordset,
  extendLeaseBy,
  fenceParams,
  runFenced,
  StoreContext,
} from './fence';
import type { PoolClient } from 'pg';
import { LeaseLostError } from '../../errors/lease-lost.error';
import type { SqlText } from '../durable-names';
import type { StepWriteBatcher } from './step-batch';

/**
 * The fenced step commit: ONE statement, one round trip, two rows (the run's, the checkpoint's): the
 * checkpoint with cursor `done` ($10 = true resets `attempts`, since attempts count claims without
 * progress), its `run.checkpoint_saved` event in the checkpoint's row (insertRecords), no event row.
 * STEP_MARK_SQL, with the same parameters, marks a model/tool step `started` before it runs ($10 =
 * false; $6 then carries values recorded by ctx.now()/uuid()/random(), flushed before anything external
 * can see them). The UPDATE is fenced by (id, worker_id, epoch); the inserts read from its RETURNING,
 * so when a newer claim has moved the epoch on, nothing at all is written and the caller raises
 * LeaseLostError.
 * $1 id, $2 worker, $3 epoch, $4 cursor, $5 ttl ms, $6 checkpoints [{step_index, step_name, output, meta}],
 * $7 attempt, $8 event type, $9 event payload, $10 progress made
 */
export const STEP_WRITE_SQL: SqlText = (t) => stepWriteSql(t, 'now()', 'select cancel_requested from run');

/**
 * STEP_WRITE_SQL for a write that saves no step (a `started` mark: $8 `step.started` or
 * `model.call_started`): its event is a row of its own, the only statement of the two that touches
 * ai_events (a commit's events live in its checkpoint rows: insertRecords). The same parameters.
 */
export const STEP_MARK_SQL: SqlText = (t) => `
${fencedRun(t, RUN_SET('now()'))}, ${insertRecords(t, '$6', '$7')}, ev as (
  insert into ${t.events} (run_id, event_type, epoch, payload)
  select run.id, $8, run.epoch, $9::jsonb from run
)
select cancel_requested from run`;

/**
 * STEP_WRITE_SQL as the last statement of a durable transaction (`@DurableTransaction`, same database):
 * sent on the transaction's own connection right before its COMMIT, so the body's writes, the
 * checkpoint and the cursor commit together or not at all, and a claim that moved the epoch on makes
 * it match no row (the transaction is rolled back). The lease is extended from the statement's own
 * clock: `now()` is the transaction's start, which may lie a lease in the past. $11 the step's index:
 * `inserted` says its checkpoint is new (false: an earlier attempt committed it, the caller rolls back).
 */
export const TX_STEP_WRITE_SQL: SqlText = (t) =>
  stepWriteSql(
    t,
    'clock_timestamp()',
    'select cancel_requested, exists (select 1 from cp where step_index = $11) as inserted from run',
  );

/** A step commit's event is its checkpoint's (insertRecords `saved`): no event row. */
const SAVED = `case when $8 = 'run.checkpoint_saved' then $9::jsonb end`;

/** What a step write sets on its run's row, `clock` the statement's time. */
const RUN_SET = (
  clock: string,
) => `cursor = $4::jsonb, attempts = case when $10::boolean then 0 else attempts end,
         ${extendLeaseBy('$5', clock)}, updated_at = ${clock}`;

function stepWriteSql(t: Parameters<SqlText>[0], clock: string, answer: string): string {
  return `
${fencedRun(t, RUN_SET(clock))}, ${insertRecords(t, '$6', '$7', 'cp', SAVED)}
${answer}`;
}

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
  const saves = event === 'run.checkpoint_saved';
  // What the batch JSON (built later, if at all) says: read now, as the statement alone would send it.
  const { runId, workerId, epoch } = fence;
  const attempt = cursor.attempt;
  return s.steps.write({
    runId,
    epoch,
    during,
    json: () =>
      `{"id":${JSON.stringify(runId)},"worker_id":${JSON.stringify(workerId)},"epoch":${epoch},"cursor":${cursorJson},"attempt":${attempt},"event":${JSON.stringify(event)},"payload":${payloadJson},"progress":${progressMade},"records":${records}}`,
    alone: async () => {
      const row = await runFenced<{ cancel_requested: boolean }>(
        s,
        fence,
        during,
        saves ? STEP_WRITE_SQL : STEP_MARK_SQL,
        [cursorJson, s.options.worker.leaseTtlMs, records, attempt, event, payloadJson, progressMade],
        saves ? 'dx_step_write' : 'dx_step_mark',
      );
      return { cancelRequested: row.cancel_requested };
    },
  });
}

/**
 * The step commit of a durable transaction (TX_STEP_WRITE_SQL) on its own connection, inside it: not
 * through the group commit (the transaction must be its own). Returns whether cancellation was
 * requested; LeaseLostError when the fence no longer matches (the caller rolls back).
 */
export async function writeStepIn(
  s: StoreContext,
  client: PoolClient,
  fence: Fence,
  cursor: RunCursor,
  checkpoints: CheckpointWrite[],
  payload: Record<string, unknown>,
  index: number,
): Promise<{ cancelRequested: boolean }> {
  const event = 'run.checkpoint_saved';
  const rows = await s.db.queryOn<{ cancel_requested: boolean; inserted: boolean }>(
    client,
    TX_STEP_WRITE_SQL,
    [
      ...fenceParams(fence),
      JSON.stringify(cursor),
      s.options.worker.leaseTtlMs,
      recordset(checkpoints),
      cursor.attempt,
      event,
      eventPayload(s.options, event, payload),
      true,
      index,
    ],
    'dx_tx_step_write',
  );
  if (!rows.length) throw new LeaseLostError(fence.runId, fence.epoch, `the commit of ${cursor.name}`);
  if (!rows[0].inserted)
    throw new Error(
      `the checkpoint of ${cursor.name} (step ${index}) is already committed (an earlier attempt's commit whose answer was lost): rolled back`,
    );
  return { cancelRequested: rows[0].cancel_requested };
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
