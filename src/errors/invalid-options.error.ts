import { DurableExecutionError } from './durable-execution.error';

/** Module options failed validation at start-up; `problems` lists every bad field and why. */
export class InvalidOptionsError extends DurableExecutionError {
  declare readonly code: 'DURABLE_INVALID_OPTIONS';
  constructor(public readonly problems: string[]) {
    super(
      'DURABLE_INVALID_OPTIONS',
      `DurableExecutionModule options are invalid; fix these fields:\n  - ${problems.join('\n  - ')}`,
    );
  }
}
