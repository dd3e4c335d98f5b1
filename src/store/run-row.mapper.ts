import type { CheckpointView, RunEvent, RunView } from '../interfaces/run.interface';
import type { LimitScope } from '../interfaces/run-reads.interface';

/**
 * The columns of ai_runs a run view is read from (`toRunView`), for statements that return a run to name
 * instead of `*`. PostgreSQL refuses to run a named prepared statement again once its result's row type
 * changed (0A000 "cached plan must not change result type"): a `*` of a table in a statement's result
 * would fail once on every pooled connection of a running process at the next migration that adds a
 * column to the table. A column `toRunView` reads must be listed here (run-row.mapper.spec.ts). @internal
 */
export const RUN_VIEW_COLUMNS = [
  'id',
  'kind',
  'kind_version',
  'generation',
  'status',
  'input',
  'output',
  'state',
  'cursor',
  'epoch',
  'worker_id',
  'lease_expires_at',
  'available_at',
  'priority',
  'attempts',
  'max_attempts',
  'idempotency_key',
  'cancel_requested_at',
  'cancel_reason',
  'parked_reason',
  'concurrency_key',
  'limited_by',
  'parent_id',
  'forked_from',
  'fork_step',
  'tags',
  'error',
  'created_at',
  'updated_at',
  'finished_at',
] as const;

/** RUN_VIEW_COLUMNS as a select list, each qualified with `alias` when given (`r.id, r.kind, ...`). @internal */
export function runViewColumns(alias?: string): string {
  return RUN_VIEW_COLUMNS.map((c) => (alias ? `${alias}.${c}` : c)).join(', ');
}

/** Row → public view. Column names are snake_case in SQL, camelCase in the API. @internal */
export function toRunView(r: Record<string, any>): RunView {
  return {
    id: r.id,
    kind: r.kind,
    version: r.kind_version ?? (Number(r.epoch) > 0 ? 1 : null),
    generation: r.generation ?? 0,
    status: r.status,
    input: r.input,
    output: r.output ?? null,
    state: r.state,
    cursor: r.cursor,
    epoch: Number(r.epoch),
    workerId: r.worker_id,
    leaseExpiresAt: r.lease_expires_at,
    availableAt: r.available_at,
    priority: r.priority,
    attempts: r.attempts,
    maxAttempts: r.max_attempts,
    idempotencyKey: r.idempotency_key,
    cancelRequestedAt: r.cancel_requested_at,
    cancelReason: r.cancel_reason,
    parkedReason: r.parked_reason,
    concurrencyKey: r.concurrency_key ?? null,
    limitedBy: limitScope(r.limited_by ?? null),
    held: isHeld(r.status, r.error),
    parentId: r.parent_id ?? null,
    forkedFrom: r.forked_from ? { runId: r.forked_from, fromStep: r.fork_step } : null,
    tags: r.tags ?? {},
    error: r.error,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    finishedAt: r.finished_at,
  };
}

/**
 * Held on non-determinism: `waiting` with the NonDeterminismError kept (run-settlement's heldWrite; a
 * retry clears the error). @internal
 */
export function isHeld(status: string, error: { code?: unknown } | null | undefined): boolean {
  return status === 'waiting' && error?.code === 'DURABLE_NON_DETERMINISM';
}

/**
 * A stored limit scope (claim-limited.ts: `["kind"]`, `["kind","key"]`, `{"rate": ["kind"]}` or
 * `{"rate": ["kind","key"]}`, JSON as text) as the API shows it. @internal
 */
export function limitScope(scope: string | null): LimitScope | null {
  if (scope === null) return null;
  let v: unknown;
  try {
    v = JSON.parse(scope);
  } catch {
    v = null;
  }
  const rate = !Array.isArray(v) && typeof v === 'object' && v !== null;
  const parts: unknown[] = rate ? ((v as { rate?: unknown[] }).rate ?? []) : Array.isArray(v) ? v : [scope];
  const [kind, key] = parts.map(String);
  return { limit: rate ? 'rate' : 'concurrency', kind: kind ?? '', ...(key !== undefined && { key }), scope };
}

/** @internal */
export function toEvent(r: Record<string, any>): RunEvent {
  return {
    id: Number(r.id),
    runId: r.run_id,
    type: r.event_type,
    epoch: Number(r.epoch),
    payload: r.payload,
    createdAt: r.created_at,
  };
}

/** @internal */
export function toCheckpoint(r: Record<string, any>): CheckpointView {
  return {
    runId: r.run_id,
    stepIndex: r.step_index,
    stepName: r.step_name,
    output: r.output,
    attempt: r.attempt,
    epoch: Number(r.epoch),
    meta: r.meta,
    createdAt: r.created_at,
  };
}
