import { DurableExecutionError } from './durable-execution.error';

/** Two workflows share one kind, or two steps/commands share one name. Raised at bootstrap. */
export class DuplicateRegistrationError extends DurableExecutionError {
  declare readonly code: 'DURABLE_DUPLICATE_REGISTRATION';
  constructor(what: string, name: string, first: string, second: string) {
    // Two classes of one workflow kind are two versions of it when each declares its own `version`.
    const hint = /workflow kind/i.test(what)
      ? ' Give one of them another name, or, for a new version of the same kind, its own `version` in @DurableWorkflow(kind, { version }).'
      : ' Give one of them another name.';
    super(
      'DURABLE_DUPLICATE_REGISTRATION',
      `${what} "${name}" is declared twice: at ${first} and at ${second}.${hint}`,
    );
  }
}
