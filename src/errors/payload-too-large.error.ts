import { DurableExecutionError } from './durable-execution.error';

/** A JSON value is above the configured size cap (`limits.*`). */
export class PayloadTooLargeError extends DurableExecutionError {
  declare readonly code: 'DURABLE_PAYLOAD_TOO_LARGE';
  constructor(
    public readonly subject: string,
    public readonly bytes: number,
    public readonly limit: number,
  ) {
    super(
      'DURABLE_PAYLOAD_TOO_LARGE',
      `The ${subject} is ${bytes} bytes, above the limit of ${limit} bytes. Store large blobs elsewhere and keep a reference, ` +
        'or raise the limit in the module options; nothing was written.',
    );
  }
}
