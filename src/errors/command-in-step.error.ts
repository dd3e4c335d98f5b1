import { DurableExecutionError } from './durable-execution.error';

/**
 * An `@IdempotentCommand` was called inside a `@DurableStep` body. A step is retried and re-run as a
 * whole, so a command inside it would have no stable key and repeat its side effect on every retry.
 */
export class CommandInStepError extends DurableExecutionError {
  declare readonly code: 'DURABLE_COMMAND_IN_STEP';
  constructor(
    public readonly command: string,
    public readonly step: string,
  ) {
    super(
      'DURABLE_COMMAND_IN_STEP',
      step.startsWith('command:')
        ? `Command "${command}" was called inside the body of ${step.replace('command:', 'command "')}": a body is ` +
            'sent again as a whole after a crash, so the inner command would repeat with no stable key. Call ' +
            'both from the workflow body (run()), one after the other. The run has failed.'
        : `Command "${command}" was called inside step "${step}": a step is re-run as a whole on retry, so the ` +
            'command would repeat with no stable key. Call the command from the workflow body (run()), next to ' +
            'the step. The run has failed.',
    );
  }
}
