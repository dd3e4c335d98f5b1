import { ArgumentsHost, Catch, ExceptionFilter, HttpStatus, Logger } from '@nestjs/common';
import { DurableErrorCode, DurableExecutionError } from '../errors/durable-execution.error';

/**
 * HTTP status of each error code a request can meet; other codes (lease lost, non-determinism, a
 * misuse…) are server-side faults and answer 500.
 */
export const DURABLE_HTTP_STATUS: Readonly<Partial<Record<DurableErrorCode, number>>> = {
  DURABLE_RUN_NOT_FOUND: HttpStatus.NOT_FOUND,
  DURABLE_COMMAND_NOT_FOUND: HttpStatus.NOT_FOUND,
  DURABLE_INVALID_RUN_STATE: HttpStatus.CONFLICT,
  DURABLE_INVALID_COMMAND_STATE: HttpStatus.CONFLICT,
  DURABLE_IDEMPOTENCY_CONFLICT: HttpStatus.CONFLICT,
  DURABLE_INVALID_ARGUMENT: HttpStatus.BAD_REQUEST,
  DURABLE_UNKNOWN_RUN_KIND: HttpStatus.BAD_REQUEST,
  DURABLE_NOT_SERIALIZABLE: HttpStatus.BAD_REQUEST,
  DURABLE_INVALID_OPTIONS: HttpStatus.BAD_REQUEST,
  DURABLE_PAYLOAD_TOO_LARGE: HttpStatus.PAYLOAD_TOO_LARGE,
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
 * 404, invalid run or command state and idempotency conflict → 409, invalid argument, unserializable
 * input and invalid options → 400, payload too large → 413. Any other `DurableExecutionError` is a
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
      body = { statusCode: status, code: exception.code, message: exception.message };
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
