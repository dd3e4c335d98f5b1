import { DurableExecutionError } from './durable-execution.error';

/**
 * An idempotency key is already used by a run of another kind, or of the same kind started with a
 * different input (`differs` says which). A retry must send the same kind and input as the first start.
 */
export class IdempotencyConflictError extends DurableExecutionError {
  declare readonly code: 'DURABLE_IDEMPOTENCY_CONFLICT';
  /** What differs from the run that holds the key. */
  public readonly differs: 'kind' | 'input';

  constructor(
    public readonly idempotencyKey: string,
    public readonly existingRunId: string,
    existingKind: string,
    requestedKind: string,
  ) {
    const differs = existingKind === requestedKind ? 'input' : 'kind';
    // The message reaches HTTP clients (DurableExceptionFilter): it names neither the other run nor its
    // kind, which may belong to another caller. `existingRunId` is there for the app's own code.
    super(
      'DURABLE_IDEMPOTENCY_CONFLICT',
      differs === 'kind'
        ? `Idempotency key ${JSON.stringify(idempotencyKey.slice(0, 120))} already belongs to a run of another kind. ` +
            'Use a key that is unique per logical run. Nothing was written.'
        : `Idempotency key ${JSON.stringify(idempotencyKey.slice(0, 120))} already belongs to a run started with a different input. ` +
            'A retry must send the same input; use a new key for a new logical run. Nothing was written.',
    );
    this.differs = differs;
  }
}
