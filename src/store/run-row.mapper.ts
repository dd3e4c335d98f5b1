import type { CheckpointView, RunEvent, RunView } from '../interfaces/run.interface';

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
    limitedBy: r.limited_by ?? null,
    parentId: r.parent_id ?? null,
    tags: r.tags ?? {},
    error: r.error,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    finishedAt: r.finished_at,
  };
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
