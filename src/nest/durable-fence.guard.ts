import {
  CanActivate,
  createParamDecorator,
  ExecutionContext,
  Inject,
  Injectable,
  Optional,
  SetMetadata,
} from '@nestjs/common';
import { warnUnsignedFences } from '../util/fence-authenticator';
import { DURABLE_FENCE_HEADER, FenceToken, parseFence } from '../util/fence-token';
import { FenceVerifier } from '../util/fence-verifier';

/** Where the guard leaves the parsed token on the request. */
const FENCE_TOKEN = Symbol('durable-fence-token');
/** The metadata `@DurableFenceKey` sets. */
const FENCE_KEY = 'durable-execution:fence-key';

type KeyOf = (request: unknown) => string | undefined;

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
 * malformed header throws `InvalidArgumentError`, which `DurableExceptionFilter` answers 400. With a
 * `FenceVerifier` provider in the module (`{ provide: FenceVerifier, useValue: new FenceVerifier({ keys }) }`)
 * it also authenticates the token before the handler runs (`verifier.authenticate`: unsigned, forged,
 * expired throw `UnauthenticatedFenceError`, 401), and checks it is for the command the request serves
 * when the handler or controller says which (`@DurableFenceKey`). Without a verifier it checks the
 * format only and says so once in the log. It does not check the token against earlier ones: the
 * handler does, with `FenceVerifier.check` inside the transaction of its write. HTTP only.
 * @example
 * ```ts
 * @Post('transfers')
 * @UseGuards(DurableFenceGuard)
 * @DurableFenceKey((req) => req.body?.idempotencyKey)
 * create(@Body() body: TransferDto, @DurableFenceToken() fence: FenceToken) { ... }
 * ```
 */
@Injectable()
export class DurableFenceGuard implements CanActivate {
  constructor(@Optional() @Inject(FenceVerifier) private readonly verifier?: FenceVerifier) {
    if (!verifier)
      warnUnsignedFences(
        'DurableFenceGuard',
        'finds no FenceVerifier provider in its module, so it checks the header format only',
      );
  }

  /** Parses the header and keeps the token on the request; throws when it is bad or not authentic. */
  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<RequestLike>();
    const token = requestFence(request);
    if (this.verifier) {
      const keyOf =
        (Reflect.getMetadata(FENCE_KEY, context.getHandler()) as KeyOf | undefined) ??
        (Reflect.getMetadata(FENCE_KEY, context.getClass()) as KeyOf | undefined);
      this.verifier.authenticate(token, { commandKey: keyOf?.(request) });
    }
    return true;
  }
}

/**
 * Tells `DurableFenceGuard` which command a request serves: `keyOf(request)` returns its idempotency
 * key (a header, a body field, a route parameter), and the guard refuses a signed token of another
 * command (401). Pass the same key to `FenceVerifier.check` as `commandKey`.
 * @example `@DurableFenceKey((req) => req.params.key)` on a lookup route
 */
export const DurableFenceKey = (
  keyOf: (request: any) => string | undefined,
): MethodDecorator & ClassDecorator => SetMetadata(FENCE_KEY, keyOf);

/**
 * The request's fencing token (a handler parameter), as `DurableFenceGuard` parsed it; without the
 * guard, parsed from the `durable-fence` header here (a bad header throws `InvalidArgumentError`).
 */
export const DurableFenceToken = createParamDecorator(
  (_data: unknown, context: ExecutionContext): FenceToken =>
    requestFence(context.switchToHttp().getRequest<RequestLike>()),
);
