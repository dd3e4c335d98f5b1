import { DurableExecutionError } from './durable-execution.error';

/** A command failed permanently (or was rejected); replay rethrows it with the stored details. */
export class CommandFailedError extends DurableExecutionError {
  declare readonly code: 'DURABLE_COMMAND_FAILED' | 'DURABLE_COMMAND_REJECTED';
  constructor(
    public readonly command: string,
    public readonly idempotencyKey: string,
    public readonly reason: string,
    public readonly rejected = false,
  ) {
    super(
      rejected ? 'DURABLE_COMMAND_REJECTED' : 'DURABLE_COMMAND_FAILED',
      rejected
        ? `Command "${command}" (${idempotencyKey}) was rejected by an operator: ${reason}. Catch this in the workflow to take another path.`
        : `Command "${command}" (${idempotencyKey}) failed permanently: ${reason}. It will not be sent again.`,
    );
  }
}
