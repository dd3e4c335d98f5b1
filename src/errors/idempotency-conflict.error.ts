import { DurableExecutionError } from './durable-execution.error';

/** An idempotency key is already used by a run of another kind. */
export class IdempotencyConflictError extends DurableExecutionError {
  constructor(
    public readonly idempotencyKey: string,
    public readonly existingRunId: string,
    existingKind: string,
    requestedKind: string,
  ) {
    super(
      'DURABLE_IDEMPOTENCY_CONFLICT',
      `Idempotency key "${idempotencyKey}" already belongs to run ${existingRunId} of kind "${existingKind}", ` +
        `not "${requestedKind}". Use a key that is unique per logical run.`,
    );
  }
}
