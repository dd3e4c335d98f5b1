import { ArgumentsHost, Catch, ExceptionFilter, HttpException, HttpStatus } from '@nestjs/common';
import { BaseExceptionFilter } from '@nestjs/core';
import { DurableExecutionError } from '../errors/durable-execution.error';
import { InvalidArgumentError } from '../errors/invalid-argument.error';
import { ScheduleTooFrequentError } from '../errors/schedule-too-frequent.error';
import { setAdminResponseHeaders } from '../nest/response-headers';

/** HTTP status of each error code an operator action can meet. */
const STATUS: Record<string, number> = {
  DURABLE_RUN_NOT_FOUND: HttpStatus.NOT_FOUND,
  DURABLE_COMMAND_NOT_FOUND: HttpStatus.NOT_FOUND,
  DURABLE_SCHEDULE_NOT_FOUND: HttpStatus.NOT_FOUND,
  DURABLE_SCHEDULE_CONFLICT: HttpStatus.CONFLICT,
  DURABLE_SCHEDULE_TOO_FREQUENT: HttpStatus.BAD_REQUEST,
  DURABLE_TOO_MANY_PENDING_SIGNALS: HttpStatus.TOO_MANY_REQUESTS,
  DURABLE_NO_WORKER_FOR_KIND: HttpStatus.SERVICE_UNAVAILABLE,
  DURABLE_TOO_MANY_STREAM_CLIENTS: HttpStatus.SERVICE_UNAVAILABLE,
  DURABLE_INVALID_RUN_STATE: HttpStatus.CONFLICT,
  DURABLE_INVALID_COMMAND_STATE: HttpStatus.CONFLICT,
  DURABLE_FORK_REFUSED: HttpStatus.CONFLICT,
  DURABLE_INVALID_ARGUMENT: HttpStatus.BAD_REQUEST,
  DURABLE_NOT_SERIALIZABLE: HttpStatus.BAD_REQUEST,
  DURABLE_PAYLOAD_TOO_LARGE: HttpStatus.PAYLOAD_TOO_LARGE,
};

/**
 * Maps the library's typed errors to HTTP: unknown run or command → 404, wrong state → 409, bad
 * argument → 400 naming the field, a schedule that fires too often → 400, a full mailbox → 429; the
 * body keeps the stable `code`. Everything else is Nest's default.
 * Every error answer carries the admin response headers (no-store, nosniff).
 * @internal
 */
@Catch()
export class AdminErrorFilter extends BaseExceptionFilter implements ExceptionFilter {
  override catch(exception: unknown, host: ArgumentsHost): void {
    // An app-wide guard that refused ran before AdminAccessGuard: its error gets the headers here.
    if (host.getType() === 'http') setAdminResponseHeaders(host.switchToHttp().getResponse());
    const status = exception instanceof DurableExecutionError ? STATUS[exception.code] : undefined;
    if (!status) return super.catch(exception, host);
    const e = exception as DurableExecutionError;
    const body: Record<string, unknown> = { statusCode: status, code: e.code, message: e.message };
    if (e instanceof InvalidArgumentError) body.errors = [{ field: e.field, messages: [e.message] }];
    if (e instanceof ScheduleTooFrequentError) body.errors = [{ field: 'cron', messages: [e.message] }];
    super.catch(new HttpException(body, status), host);
  }
}
