import { DurableExecutionError } from './durable-execution.error';

/** Two workflows share one kind, or two steps/commands share one name. Raised at bootstrap. */
export class DuplicateRegistrationError extends DurableExecutionError {
  declare readonly code: 'DURABLE_DUPLICATE_REGISTRATION';
  constructor(what: string, name: string, first: string, second: string) {
    super(
      'DURABLE_DUPLICATE_REGISTRATION',
      `${what} "${name}" is declared twice: at ${first} and at ${second}. Give one of them another name.`,
    );
  }
}
