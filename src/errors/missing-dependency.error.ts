import { DurableExecutionError } from './durable-execution.error';

/** An optional peer dependency that a feature needs is not installed. */
export class MissingDependencyError extends DurableExecutionError {
  declare readonly code: 'DURABLE_MISSING_DEPENDENCY';
  constructor(
    public readonly packageName: string,
    feature: string,
  ) {
    super(
      'DURABLE_MISSING_DEPENDENCY',
      `${feature} needs the optional package "${packageName}": npm install ${packageName} (or switch ${feature} off in the options).`,
    );
  }
}
