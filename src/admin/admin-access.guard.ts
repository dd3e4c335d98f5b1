import {
  CanActivate,
  ExecutionContext,
  ForbiddenException,
  Injectable,
  SetMetadata,
  UnsupportedMediaTypeException,
} from '@nestjs/common';
import { DURABLE_ADMIN_ACTION, DURABLE_OPERATOR } from './admin.constants';
import type { ResolvedAdminOptions } from './admin-options.interface';
import { AdminGuardRef } from './admin-guard.ref';
import { setAdminResponseHeaders } from '../nest/response-headers';

/** Marks an admin handler that changes a run (guards can treat reads and actions apart). @internal */
export const AdminAction = () => SetMetadata(DURABLE_ADMIN_ACTION, true);

/** Whether this request is an admin action (cancel, retry, approve, reject, resolve, signal). */
export function isDurableAdminAction(context: ExecutionContext): boolean {
  return Reflect.getMetadata(DURABLE_ADMIN_ACTION, context.getHandler()) === true;
}

/** Who is acting: the `operator` option, then what a guard set, then `request.user`, then `anonymous`. */
export function operatorOf(request: any, options: Pick<ResolvedAdminOptions, 'operator'>): string {
  const u = request?.user;
  const fromUser = u && typeof u === 'object' ? (u.username ?? u.email ?? u.name ?? u.id ?? u.sub) : u;
  const who = options.operator?.(request) ?? request?.[DURABLE_OPERATOR] ?? fromUser;
  return who === undefined || who === null || String(who).trim() === '' ? 'anonymous' : String(who);
}

/**
 * Every admin route passes here: it sets `Cache-Control: no-store` and `X-Content-Type-Options: nosniff`,
 * then the configured guard decides (401/403 are its answers; `false` is a
 * 403), then actions must be JSON requests, which a cross-site form cannot send without a CORS
 * preflight (a cheap CSRF barrier for apps whose guard relies on cookies). @internal
 */
@Injectable()
export class AdminAccessGuard implements CanActivate {
  constructor(private readonly guard: AdminGuardRef) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    // First, so that a 401/403 from the app's guard carries them too.
    setAdminResponseHeaders(context.switchToHttp().getResponse());
    if (!(await this.guard.allows(context))) {
      throw new ForbiddenException('The admin guard refused this request.');
    }
    if (isDurableAdminAction(context)) {
      const type = String(context.switchToHttp().getRequest()?.headers?.['content-type'] ?? '');
      if (!type.toLowerCase().startsWith('application/json')) {
        throw new UnsupportedMediaTypeException(
          'Admin actions take a JSON body (Content-Type: application/json).',
        );
      }
    }
    return true;
  }
}
