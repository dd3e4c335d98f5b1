import { DurableExecutionError } from './durable-execution.error';

/** The operation does not apply to a command in its current status (e.g. approving a settled one). */
export class InvalidCommandStateError extends DurableExecutionError {
  declare readonly code: 'DURABLE_INVALID_COMMAND_STATE';
  constructor(
    public readonly idempotencyKey: string,
    public readonly status: string,
    operation: string,
  ) {
    super(
      'DURABLE_INVALID_COMMAND_STATE',
      `Cannot ${operation} command "${idempotencyKey}": it is ${status}. Nothing was changed.`,
    );
  }
}
