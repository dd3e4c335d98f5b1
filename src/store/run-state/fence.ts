import { LeaseLostError } from '../../errors/lease-lost.error';
import type { ResolvedDurableOptions } from '../../options/durable-execution-options.interface';
import type { DurableDatabase } from '../durable-database';
import type { DurableNames, SqlText } from '../durable-names';
import { CURRENT_TIMELINE } from '../sql/timeline.sql';

export { CURRENT_TIMELINE };

/** The (run, worker, epoch) triple every fenced write carries. */
export interface Fence {
  runId: string;
  workerId: string;
  epoch: number;
  /** The WAL timeline the claim was made on (with `epoch`, the fencing token a target compares). */
  timeline?: number;
  /** The claim found the run created or last claimed on another timeline (see ClaimedRun.lookupFirst). */
  lookupFirst?: boolean;
  /** The run's generation (`ctx.continueAsNew`): keys the run derives name it when above 0. */
  generation?: number;
  /** A fork that keeps its original's keys (`keepKeys`): the key prefix its commands send under. */
  keysFrom?: string | null;
}

/** `:g<n>` for a run's generation above 0, else nothing (keys of generation 0 are as they always were). */
export const generationPart = (generation = 0): string => (generation > 0 ? `:g${generation}` : '');

/** A checkpoint row to insert: serialised output (JSON text) plus optional meta. */
export interface CheckpointWrite {
  index: number;
  name: string;
  outputJson: string;
  metaJson?: string | null;
  /** Delivery order of a result (null for recorded values). */
  seq?: number | null;
  /** Hash of the call's name and arguments. */
  fingerprint?: string | null;
  /**
   * A step failure the workflow saw (meta `{"failed":true}`, output the stored error). Carried like a
   * recorded value by the next write; dropped when the run is retried because of it.
   */
  failure?: boolean;
}

/** What every run-state statement needs: the pool and the resolved options (lease TTL, event limits). */
export interface StoreContext {
  readonly db: DurableDatabase;
  readonly options: ResolvedDurableOptions;
}

/**
 * The fence, written once: the run row this claim still owns. Every fenced statement binds it as
 * $1 run id, $2 worker id, $3 epoch; a newer claim has raised the epoch, so a stale worker matches
 * no row and writes nothing. The row's timeline (set by the claim) must be the server's: after a
 * failover the claim's later commits may have been lost with the old primary, and a worker that wrote on
 * would write on top of a hole in the run's history; its next write fails instead (LeaseLostError) and
 * the next claim replays from what the new primary holds.
 */
export const FENCE = `id = $1 and worker_id = $2 and epoch = $3 and status = 'running' and timeline = ${CURRENT_TIMELINE}`;

/** The fenced UPDATE of the run row as the statement's first CTE, `run`: every other CTE reads it. */
export function fencedRun(
  t: DurableNames,
  set: string,
  returning = 'id, epoch, cancel_requested_at is not null as cancel_requested',
): string {
  return `with run as (
  update ${t.runs}
     set ${set}
   where ${FENCE}
  returning ${returning}
)`;
}

/**
 * The lease extended from the database clock by `ttlParam` milliseconds: from the transaction's start
 * (`now()`), or, in a statement that ends a long transaction (a durable transaction's commit), from
 * the statement's own time (`clock_timestamp()`), so the lease it grants does not start in the past.
 */
export const extendLeaseBy = (ttlParam: string, clock = 'now()'): string =>
  `lease_expires_at = ${clock} + ${ttlParam} * interval '1 millisecond'`;

/**
 * CTE `<name>`: the checkpoints of the JSON array `param` (built by `recordset`) inserted for the run of
 * CTE `run`. A recorded value rides on every write until one that carries it commits, so an index may
 * already be there: `do nothing` (and no second event). Two of them carry an event of the run's trail in
 * their row, with an id from the events' sequence, instead of an event row (EVENT_TRAIL): a step
 * failure the workflow saw (`meta.failed`, recorded by the next write after it: `step.failed`, its
 * payload `meta.event`), and, given `saved` (a jsonb expression, null when the write saves no step),
 * the step whose index is its `step` (`run.checkpoint_saved`, that payload).
 */
export function insertRecords(
  t: DurableNames,
  param: string,
  attempt = '0',
  name = 'cp',
  saved?: string,
): string {
  const step = saved === undefined ? 'false' : `(${saved})->>'step' = c.step_index::text`;
  const failed = `coalesce((c.meta->>'failed')::boolean, false)`;
  return `${name} as (
  insert into ${t.checkpoints} (run_id, step_index, step_name, output, attempt, epoch, meta, seq, fingerprint, event_id, event)
  select run.id, c.step_index, c.step_name, coalesce(c.output, 'null'::jsonb), ${attempt}, run.epoch, c.meta, c.seq, c.fingerprint,
         case when ${step} or ${failed} then nextval('${t.eventIds}') end,
         case when ${step} then ${saved ?? 'null::jsonb'} when ${failed} then coalesce(c.meta->'event', '{}'::jsonb) end
    from run, jsonb_to_recordset(${param}::jsonb) as c(step_index int, step_name text, output jsonb, meta jsonb, seq int, fingerprint text)
  on conflict (run_id, step_index) do nothing
  returning run_id, epoch, step_index, step_name, output, meta
)`;
}

/** Builds the jsonb_to_recordset argument without re-serialising already serialised outputs. */
export function recordset(rows: CheckpointWrite[]): string {
  return `[${rows
    .map(
      (r) =>
        `{"step_index":${r.index},"step_name":${JSON.stringify(r.name)},"output":${r.outputJson},"meta":${r.metaJson ?? 'null'},"seq":${r.seq ?? 'null'},"fingerprint":${r.fingerprint ? JSON.stringify(r.fingerprint) : 'null'}}`,
    )
    .join(',')}]`;
}

/** The fence's three parameters, $1..$3. */
export function fenceParams(f: Fence): [string, string, number] {
  return [f.runId, f.workerId, f.epoch];
}

/**
 * Runs a fenced statement: its rows, or LeaseLostError (naming `during`) when the fence matched no
 * row. Nothing was written then: every CTE reads the fenced `run`.
 */
export async function runFenced<R extends Record<string, unknown>>(
  s: StoreContext,
  f: Fence,
  during: string,
  sql: SqlText,
  params: unknown[],
  name: string,
): Promise<R> {
  const { rows } = await s.db.query<R>(sql, [...fenceParams(f), ...params], name);
  if (!rows.length) throw new LeaseLostError(f.runId, f.epoch, during);
  return rows[0];
}

/** A timestamp the database returned, or null for infinity / none. */
export function finiteDate(v: unknown): Date | null {
  return v instanceof Date && Number.isFinite(v.getTime()) ? v : null;
}
