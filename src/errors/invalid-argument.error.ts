import { DurableExecutionError } from './durable-execution.error';

/** A method argument is invalid; `field` names it. Nothing was written. */
export class InvalidArgumentError extends DurableExecutionError {
  declare readonly code: 'DURABLE_INVALID_ARGUMENT';
  constructor(
    public readonly field: string,
    reason: string,
  ) {
    super('DURABLE_INVALID_ARGUMENT', `${field} ${reason}. Nothing was written.`);
  }
}
