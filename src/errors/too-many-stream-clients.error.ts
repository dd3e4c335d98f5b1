import { DurableExecutionError } from './durable-execution.error';

/**
 * `runEventStream` (an SSE route, the admin API's run stream) while this process already serves
 * `limits.maxStreamClients` SSE clients: refused before any byte is sent (with `DurableExceptionFilter`,
 * a 503). The client may try again later, or reach another instance.
 */
export class TooManyStreamClientsError extends DurableExecutionError {
  declare readonly code: 'DURABLE_TOO_MANY_STREAM_CLIENTS';
  constructor(
    /** The limit (`limits.maxStreamClients`). */
    public readonly max: number,
  ) {
    super(
      'DURABLE_TOO_MANY_STREAM_CLIENTS',
      `This process already serves ${max} stream clients (limits.maxStreamClients): try again later, ` +
        'or raise the limit if the process has the memory and database connections for more.',
    );
  }
}
