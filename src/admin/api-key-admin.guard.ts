import {
  CanActivate,
  ExecutionContext,
  ForbiddenException,
  HttpException,
  HttpStatus,
  Logger,
  UnauthorizedException,
} from '@nestjs/common';
import { timingSafeEqual } from 'node:crypto';
import { InvalidOptionsError } from '../errors/invalid-options.error';
import { isDurableAdminAction } from './admin-access.guard';
import { DURABLE_OPERATOR } from './admin.constants';
import type { AdminSessionStore } from '../store/admin-sessions.store';
import {
  crossSiteProblem,
  DURABLE_ADMIN_CSRF_HEADER,
  DURABLE_ADMIN_SESSION_COOKIE,
  isSessionToken,
  keyIndexOf,
  keyRef,
  newSalt,
  newSessionToken,
  readCookies,
  tokenHash,
} from './login/admin-session';
import {
  clientOf,
  LOGIN_FAILURES_ALLOWED,
  LOGIN_FAILURES_ALLOWED_IN_ALL,
  LoginThrottle,
} from './login/login-throttle';

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
 * 403. Wrong keys are logged and limited per client address like the sign-in page's (together with
 * them): after 10 in 5 minutes every key from that address is a 429 with Retry-After until the window
 * ends (the address is Express's `req.ip`: behind a proxy set `trust proxy`, or every client is one);
 * and in all: after 100 wrong keys in 5 minutes from any addresses, every address that has not given a
 * right key in the last 5 minutes gets a 429 until that window ends (session cookies go on working). The holder's name is what the event trail records as `by`. Besides the header it accepts the
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
  /** The server-side sessions of the sign-in page, attached by the admin module (`login: true`). */
  private sessions?: { store: AdminSessionStore; ttlMs: number };
  /** Wrong keys per client address (header and sign-in page), in this process. */
  private readonly throttle = new LoginThrottle();
  private readonly logger = new Logger('DurableAdmin');

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

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const req = context.switchToHttp().getRequest();
    const headers = req?.headers ?? {};
    const bearer = /^Bearer\s+(.+)$/i.exec(String(headers.authorization ?? ''))?.[1];
    const given = headers[this.header] ?? bearer;
    let holder: ApiKeyHolder | undefined;
    if (typeof given === 'string' && given) {
      holder = this.checkKey(given, req, context);
    } else {
      holder = await this.fromCookie(req, context);
    }
    if (holder.readOnly && isDurableAdminAction(context)) {
      throw new ForbiddenException(`${holder.operator} may read runs but not act on them.`);
    }
    req[DURABLE_OPERATOR] = holder.operator;
    return true;
  }

  /** The holder of a key sent in the header; 401 for a wrong one, 429 while its client is locked out. */
  private checkKey(given: string, req: any, context: ExecutionContext): ApiKeyHolder {
    const client = clientOf(req);
    const wait = this.throttle.retryAfterMs(client);
    if (wait > 0) {
      const s = Math.ceil(wait / 1000);
      const all = this.throttle.refusedByAll(client);
      const n = this.throttle.refused(client);
      // The first refusal of a lockout, then every 100th: a flood cannot flood the log.
      if (n % 100 === 1)
        this.logger.warn(
          all
            ? `admin API keys refused from every address that has not signed in lately: more than ` +
                `${LOGIN_FAILURES_ALLOWED_IN_ALL} wrong keys in 5 min from all addresses (${n} refused, the last ` +
                `from ${client}; retry in ${s} s)`
            : `admin API key refused for ${client}: too many wrong keys (${n} refused; retry in ${s} s)`,
        );
      const res = context.switchToHttp().getResponse();
      if (typeof res?.setHeader === 'function') res.setHeader('Retry-After', String(s));
      else if (typeof res?.header === 'function') res.header('Retry-After', String(s));
      throw new HttpException(
        {
          statusCode: HttpStatus.TOO_MANY_REQUESTS,
          message: all
            ? `Too many wrong API keys from all addresses: try again in ${s} s.`
            : `Too many wrong API keys from this address: try again in ${s} s.`,
        },
        HttpStatus.TOO_MANY_REQUESTS,
      );
    }
    const holder = this.find(Buffer.from(given));
    if (!holder) {
      const n = this.throttle.failed(client);
      this.logger.warn(
        `admin API request with an unknown key from ${client} (${n} in the last 5 min; ${LOGIN_FAILURES_ALLOWED} allowed)`,
      );
      throw new UnauthorizedException('Unknown API key.');
    }
    this.throttle.succeeded(client);
    return holder;
  }

  /** The holder signed in by the session cookie; 401 without one or with a bad one. */
  private async fromCookie(req: any, context: ExecutionContext): Promise<ApiKeyHolder> {
    const cookies = readCookies(req, DURABLE_ADMIN_SESSION_COOKIE);
    if (!cookies.length) throw new UnauthorizedException(`An API key is required (${this.header} header).`);
    let holder: ApiKeyHolder | undefined;
    for (const token of cookies.filter(isSessionToken)) {
      holder ??= await this.sessionHolder(token);
    }
    if (!holder) {
      throw new UnauthorizedException(
        'The sign-in cookie is not valid (expired, signed out, damaged, or of a key no longer accepted).',
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
    return holder;
  }

  /**
   * The holder of a live session `token`: its row, and the key of this guard its salt names (by index)
   * if the reference under the token matches it (one HMAC). A changed key, or keys reordered, ends it.
   */
  private async sessionHolder(token: string): Promise<ApiKeyHolder | undefined> {
    if (!this.sessions) return undefined;
    const row = await this.sessions.store.find(tokenHash(token), this.sessions.ttlMs);
    if (!row) return undefined;
    const entry = this.holders[keyIndexOf(row.salt) ?? -1];
    if (!entry) return undefined;
    const stored = Buffer.from(row.keyRef, 'hex');
    const ref = keyRef(token, row.salt, entry.key);
    const same = ref.length === stored.length && timingSafeEqual(ref, stored);
    return same && entry.holder.operator === row.operator ? entry.holder : undefined;
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

/** Gives the guard the server-side sessions of the sign-in page. @internal */
export function attachAdminSessions(guard: ApiKeyAdminGuard, store: AdminSessionStore, ttlMs: number): void {
  guard['sessions'] = { store, ttlMs };
}

/**
 * Signs the holder of `key` in: a new random session stored on the server (its hash, the operator, the
 * index of the key and a reference to it under the token: `keyRef`), and its token for the cookie;
 * undefined when `key` is none of the guard's. @internal
 */
export async function issueAdminSession(guard: ApiKeyAdminGuard, key: string): Promise<string | undefined> {
  const sessions = guard['sessions'];
  const match = guard['find'](Buffer.from(key));
  if (!match || !sessions) return undefined;
  const index = guard['holders'].findIndex((h) => h.holder === match);
  const token = newSessionToken();
  const salt = newSalt(index);
  await sessions.store.create(
    tokenHash(token),
    {
      operator: match.operator,
      keyRef: keyRef(token, salt, guard['holders'][index].key).toString('hex'),
      salt,
    },
    sessions.ttlMs,
  );
  return token;
}

/** Ends the sessions whose tokens the request's cookie carries (sign-out). @internal */
export async function revokeAdminSessions(guard: ApiKeyAdminGuard, req: unknown): Promise<void> {
  const sessions = guard['sessions'];
  if (!sessions) return;
  for (const token of readCookies(req, DURABLE_ADMIN_SESSION_COOKIE).filter(isSessionToken))
    await sessions.store.revoke(tokenHash(token));
}

/** The guard's count of wrong keys per client, which the sign-in page shares. @internal */
export function keyThrottleOf(guard: ApiKeyAdminGuard): LoginThrottle {
  return guard['throttle'];
}

/** The header the guard reads the key from (lower case). @internal */
export function apiKeyHeaderOf(guard: ApiKeyAdminGuard): string {
  return guard['header'];
}
