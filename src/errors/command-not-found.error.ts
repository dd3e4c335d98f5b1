import { DurableExecutionError } from './durable-execution.error';

/** No command with this idempotency key exists (for this run). */
export class CommandNotFoundError extends DurableExecutionError {
  declare readonly code: 'DURABLE_COMMAND_NOT_FOUND';
  constructor(public readonly idempotencyKey: string) {
    super(
      'DURABLE_COMMAND_NOT_FOUND',
      `No command with key "${idempotencyKey}" exists for that run. List the run's commands with CommandGateway.listForRun.`,
    );
  }
}
