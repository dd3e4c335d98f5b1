import { CanActivate, ExecutionContext, ForbiddenException, UnauthorizedException } from '@nestjs/common';
import { timingSafeEqual } from 'node:crypto';
import { InvalidOptionsError } from '../errors/invalid-options.error';
import { isDurableAdminAction } from './admin-access.guard';
import { DURABLE_OPERATOR } from './admin.constants';
import {
  crossSiteProblem,
  DURABLE_ADMIN_CSRF_HEADER,
  DURABLE_ADMIN_SESSION_COOKIE,
  mintSession,
  readCookies,
  verifySession,
} from './login/admin-session';

/** One key's holder: the name recorded as `by`, and whether they may only read. */
export interface ApiKeyHolder {
  operator: string;
  readOnly?: boolean;
}

/** Options of `ApiKeyAdminGuard`. */
export interface ApiKeyAdminGuardOptions {
  /** API key → who holds it (a name, or `{ operator, readOnly }`). Load the keys from your secrets. */
  keys: Record<string, string | ApiKeyHolder>;
  /** Header carrying the key. Default `x-api-key`; `Authorization: Bearer <key>` is accepted too. */
  header?: string;
}

/**
 * A ready guard for the admin module: no key → 401, an unknown key → 401, a read-only key on an action →
 * 403. The holder's name is what the event trail records as `by`. Besides the header it accepts the
 * session cookie of the admin sign-in page (`login: true`): a cookie that is damaged, expired or made
 * with another key is a 401, and an action sent with the cookie needs the `X-Durable-Admin` header and
 * a same-origin request (403 otherwise), so a cross-site form cannot act on runs.
 * @example
 * ```ts
 * DurableAdminModule.forRoot({ guard: new ApiKeyAdminGuard({ keys: { [process.env.OPS_KEY!]: 'ops-oncall' } }) })
 * ```
 */
export class ApiKeyAdminGuard implements CanActivate {
  private readonly holders: Array<{ key: Buffer; holder: ApiKeyHolder }>;
  private readonly header: string;

  constructor(options: ApiKeyAdminGuardOptions) {
    const entries = Object.entries(options?.keys ?? {});
    const weak = entries.filter(([k]) => k.length < 16 || k === 'undefined').map(([, h]) => h);
    if (!entries.length || weak.length) {
      throw new InvalidOptionsError([
        'ApiKeyAdminGuard: keys must be a non-empty map of keys of at least 16 characters (is a secret unset?)',
      ]);
    }
    this.holders = entries.map(([k, h]) => ({
      key: Buffer.from(k),
      holder: typeof h === 'string' ? { operator: h } : h,
    }));
    this.header = (options.header ?? 'x-api-key').toLowerCase();
  }

  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest();
    const headers = req?.headers ?? {};
    const bearer = /^Bearer\s+(.+)$/i.exec(String(headers.authorization ?? ''))?.[1];
    const given = headers[this.header] ?? bearer;
    let holder: ApiKeyHolder | undefined;
    if (typeof given === 'string' && given) {
      holder = this.find(Buffer.from(given));
      if (!holder) throw new UnauthorizedException('Unknown API key.');
    } else {
      holder = this.fromCookie(req, context);
    }
    if (holder.readOnly && isDurableAdminAction(context)) {
      throw new ForbiddenException(`${holder.operator} may read runs but not act on them.`);
    }
    req[DURABLE_OPERATOR] = holder.operator;
    return true;
  }

  /** The holder signed in by the session cookie; 401 without one or with a bad one. */
  private fromCookie(req: any, context: ExecutionContext): ApiKeyHolder {
    const sessions = readCookies(req, DURABLE_ADMIN_SESSION_COOKIE);
    if (!sessions.length) throw new UnauthorizedException(`An API key is required (${this.header} header).`);
    const keys = this.holders.map((h) => h.key);
    const index = sessions.map((s) => verifySession(s, keys)).find((i) => i >= 0) ?? -1;
    if (index < 0) {
      throw new UnauthorizedException(
        'The sign-in cookie is not valid (expired, damaged or of another key).',
      );
    }
    if (isDurableAdminAction(context)) {
      const csrf = req.headers[DURABLE_ADMIN_CSRF_HEADER];
      const crossSite = crossSiteProblem(req);
      if (typeof csrf !== 'string' || !csrf || crossSite) {
        throw new ForbiddenException(
          `An action signed in by cookie must come from this site with the ${DURABLE_ADMIN_CSRF_HEADER} header` +
            (crossSite ? ` (${crossSite}).` : '.'),
        );
      }
    }
    return this.holders[index].holder;
  }

  /** Compares against every key in constant time per key, so timing tells nothing about a near miss. */
  private find(given: Buffer): ApiKeyHolder | undefined {
    let found: ApiKeyHolder | undefined;
    for (const { key, holder } of this.holders) {
      if (key.length === given.length && timingSafeEqual(key, given) && !found) found = holder;
    }
    return found;
  }
}

/** A session cookie value for `key` if it is one of the guard's keys, else undefined. @internal */
export function issueAdminSession(guard: ApiKeyAdminGuard, key: string, ttlMs: number): string | undefined {
  const given = Buffer.from(key);
  let match: Buffer | undefined;
  for (const h of guard['holders']) {
    if (h.key.length === given.length && timingSafeEqual(h.key, given) && !match) match = h.key;
  }
  return match ? mintSession(match, Date.now() + ttlMs) : undefined;
}

/** The header the guard reads the key from (lower case). @internal */
export function apiKeyHeaderOf(guard: ApiKeyAdminGuard): string {
  return guard['header'];
}
