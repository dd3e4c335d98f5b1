import { CanActivate, createParamDecorator, ExecutionContext, Injectable } from '@nestjs/common';
import { DURABLE_FENCE_HEADER, FenceToken, parseFence } from '../util/fence-token';

/** Where the guard leaves the parsed token on the request. */
const FENCE_TOKEN = Symbol('durable-fence-token');

interface RequestLike {
  headers?: Record<string, string | string[] | undefined>;
  [FENCE_TOKEN]?: FenceToken;
}

/** The request's token: the one the guard stored, else parsed from its header now. */
function requestFence(request: RequestLike): FenceToken {
  return (request[FENCE_TOKEN] ??= parseFence(request.headers?.[DURABLE_FENCE_HEADER]));
}

/**
 * Admits a request only with a well-formed `durable-fence` header (`fenceHeaders` on the caller's side):
 * parses it (`parseFence`) and keeps the token on the request for `@DurableFenceToken()`. A missing or
 * malformed header throws `InvalidArgumentError`, which `DurableExceptionFilter` answers 400. It does not
 * check the token against earlier ones: the handler does, with `FenceVerifier.check` inside the
 * transaction of its write. HTTP only.
 * @example
 * ```ts
 * @Post('transfers')
 * @UseGuards(DurableFenceGuard)
 * create(@Body() body: TransferDto, @DurableFenceToken() fence: FenceToken) { ... }
 * ```
 */
@Injectable()
export class DurableFenceGuard implements CanActivate {
  /** Parses the header and keeps the token on the request; throws InvalidArgumentError when it is bad. */
  canActivate(context: ExecutionContext): boolean {
    requestFence(context.switchToHttp().getRequest<RequestLike>());
    return true;
  }
}

/**
 * The request's fencing token (a handler parameter), as `DurableFenceGuard` parsed it; without the
 * guard, parsed from the `durable-fence` header here (a bad header throws `InvalidArgumentError`).
 */
export const DurableFenceToken = createParamDecorator(
  (_data: unknown, context: ExecutionContext): FenceToken =>
    requestFence(context.switchToHttp().getRequest<RequestLike>()),
);
