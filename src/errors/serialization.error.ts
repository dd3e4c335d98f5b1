import { DurableExecutionError } from './durable-execution.error';

/** A value that must be stored as JSON (run input, step output, command args) is not plain JSON. */
export class SerializationError extends DurableExecutionError {
  declare readonly code: 'DURABLE_NOT_SERIALIZABLE';
  constructor(
    /** What was being stored, e.g. `input of run kind "po"` or `output of step "Quote.build"`. */
    public readonly subject: string,
    /** JSON path of the offending value, e.g. `$.items[3].price`. */
    public readonly path: string,
    reason: string,
  ) {
    super(
      'DURABLE_NOT_SERIALIZABLE',
      `The ${subject} cannot be stored: ${path} ${reason}. Pass plain JSON (objects, arrays, strings, finite numbers, booleans, null); nothing was written.`,
    );
  }
}
