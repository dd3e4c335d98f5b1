import { ArgumentsHost, Catch, ExceptionFilter, HttpStatus, Logger } from '@nestjs/common';
import { DurableErrorCode, DurableExecutionError } from '../errors/durable-execution.error';

/**
 * HTTP status of each error code a request can meet; other codes (lease lost, non-determinism, a
 * misuse…) are server-side faults and answer 500.
 */
export const DURABLE_HTTP_STATUS: Readonly<Partial<Record<DurableErrorCode, number>>> = {
  DURABLE_RUN_NOT_FOUND: HttpStatus.NOT_FOUND,
  DURABLE_COMMAND_NOT_FOUND: HttpStatus.NOT_FOUND,
  DURABLE_SCHEDULE_NOT_FOUND: HttpStatus.NOT_FOUND,
  DURABLE_INVALID_RUN_STATE: HttpStatus.CONFLICT,
  DURABLE_INVALID_COMMAND_STATE: HttpStatus.CONFLICT,
  DURABLE_IDEMPOTENCY_CONFLICT: HttpStatus.CONFLICT,
  DURABLE_SCHEDULE_CONFLICT: HttpStatus.CONFLICT,
  // A run's mailbox is full (limits.maxPendingSignals, maxPendingSignalsPerName): send again later.
  DURABLE_TOO_MANY_PENDING_SIGNALS: HttpStatus.TOO_MANY_REQUESTS,
  // A target's FenceVerifier refused a superseded claim's request.
  DURABLE_STALE_FENCE: HttpStatus.CONFLICT,
  // ... or a token it could not authenticate (unsigned, forged, expired, another command's).
  DURABLE_UNAUTHENTICATED_FENCE: HttpStatus.UNAUTHORIZED,
  // A run named a LangGraph thread another run owns, without sharing it.
  DURABLE_FOREIGN_THREAD: HttpStatus.FORBIDDEN,
  // A fork whose cut would inherit something unsettled (a command in doubt, a running child) or cut a Promise.all.
  DURABLE_FORK_REFUSED: HttpStatus.CONFLICT,
  DURABLE_INVALID_ARGUMENT: HttpStatus.BAD_REQUEST,
  // A schedule made at run time that fires more often than limits.minScheduleIntervalMs.
  DURABLE_SCHEDULE_TOO_FREQUENT: HttpStatus.BAD_REQUEST,
  DURABLE_UNKNOWN_RUN_KIND: HttpStatus.BAD_REQUEST,
  DURABLE_NOT_SERIALIZABLE: HttpStatus.BAD_REQUEST,
  DURABLE_INVALID_OPTIONS: HttpStatus.BAD_REQUEST,
  // A keyed kind started by name with no key (unkeyedStarts: 'refuse'): pass the class or a key.
  DURABLE_MISSING_CONCURRENCY_KEY: HttpStatus.BAD_REQUEST,
  DURABLE_PAYLOAD_TOO_LARGE: HttpStatus.PAYLOAD_TOO_LARGE,
  // No live worker serves the kind (unservedKinds: 'refuse'): try again when one runs.
  DURABLE_NO_WORKER_FOR_KIND: HttpStatus.SERVICE_UNAVAILABLE,
  // This process serves limits.maxStreamClients SSE clients already: try again later (or elsewhere).
  DURABLE_TOO_MANY_STREAM_CLIENTS: HttpStatus.SERVICE_UNAVAILABLE,
  // A "wait for the result" endpoint: the run goes on (poll it, or wait again) ...
  DURABLE_RESULT_TIMEOUT: HttpStatus.ACCEPTED,
  // ... or it ended without an output (failed, dead-lettered, cancelled).
  DURABLE_RUN_FAILED: HttpStatus.UNPROCESSABLE_ENTITY,
};

/** What the filter answers. */
export interface DurableErrorBody {
  statusCode: number;
  code?: DurableErrorCode;
  message: string;
}

interface ExpressLike {
  status(code: number): { json(body: unknown): unknown };
  json(body: unknown): unknown;
}
interface FastifyLike {
  code(code: number): { send(body: unknown): unknown };
}

/**
 * Maps the library's errors to HTTP answers `{ statusCode, code, message }`: run or command not found →
 * 404, invalid run or command state, idempotency conflict and a stale fencing token (`FenceVerifier`) →
 * 409, a fencing token a target could not authenticate (unsigned, forged, expired, another command's) →
 * 401, a LangGraph thread another run owns (`ForeignThreadError`) → 403, invalid argument, unknown kind,
 * unserializable input and invalid options → 400, payload too large → 413, a schedule made at run time
 * that fires too often (`limits.minScheduleIntervalMs`) → 400, a full
 * mailbox (`limits.maxPendingSignals`) → 429, too many stream clients (`limits.maxStreamClients`) → 503;
 * for an endpoint that waits on `RunRepository.result()`: the wait timed out → 202 (the run goes on), the run ended failed,
 * dead-lettered or cancelled → 422 (its status and error code, never its error message: run data). Any other `DurableExecutionError` is a
 * server fault: 500 with Nest's generic body (no message leaked), logged. Catches only
 * `DurableExecutionError`, so the app's other errors reach its other filters untouched. Works on Express
 * and Fastify; in non-HTTP contexts it rethrows.
 * @example
 * ```ts
 * app.useGlobalFilters(new DurableExceptionFilter()); // or @UseFilters(DurableExceptionFilter) on a controller
 * ```
 */
@Catch(DurableExecutionError)
export class DurableExceptionFilter implements ExceptionFilter<DurableExecutionError> {
  private readonly logger = new Logger('DurableExecution');

  catch(exception: DurableExecutionError, host: ArgumentsHost): void {
    if (host.getType() !== 'http') throw exception;
    const status = DURABLE_HTTP_STATUS[exception.code];
    let body: DurableErrorBody;
    if (status) {
      body = { statusCode: status, code: exception.code, message: publicMessage(exception) };
    } else {
      this.logger.error(exception.message, exception.stack);
      body = { statusCode: HttpStatus.INTERNAL_SERVER_ERROR, message: 'Internal server error' };
    }
    const res = host.switchToHttp().getResponse<ExpressLike | FastifyLike>();
    if (typeof (res as ExpressLike).json === 'function') {
      (res as ExpressLike).status(body.statusCode).json(body);
    } else {
      (res as FastifyLike).code(body.statusCode).send(body); // Fastify's reply
    }
  }
}

/** What the answer says: the error's message, except a failed run's, whose message quotes run data. */
function publicMessage(exception: DurableExecutionError): string {
  if (exception.code !== 'DURABLE_RUN_FAILED') return exception.message;
  const e = exception as DurableExecutionError & {
    runId?: string;
    status?: string;
    runError?: { code?: unknown } | null;
  };
  const code = typeof e.runError?.code === 'string' ? ` (error code ${e.runError.code})` : '';
  return `Run ${e.runId} ended ${e.status}${code}: read it with RunRepository.get for its error.`;
}
