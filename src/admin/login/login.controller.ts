import { Get, HttpStatus, Inject, Logger, OnModuleInit, Post, Req, Res } from '@nestjs/common';
import { AdminSessionStore } from '../../store/admin-sessions.store';
import { ApiExcludeController } from '../../nest/openapi';
import { AdminGuardRef } from '../admin-guard.ref';
import { DURABLE_ADMIN_OPTIONS } from '../admin.constants';
import type { ResolvedAdminOptions } from '../admin-options.interface';
import {
  ApiKeyAdminGuard,
  attachAdminSessions,
  issueAdminSession,
  keyThrottleOf,
  revokeAdminSessions,
} from '../api-key-admin.guard';
import { clientOf, LoginThrottle } from './login-throttle';
import { crossSiteProblem, isHttps, sessionCookie } from './admin-session';
import { adminBaseOf, LOGIN_PAGE_HEADERS, renderLoginPage, send } from './login-page';

/**
 * The sign-in page of the admin module (`login: true`): `GET <path>/login` shows a form, `POST
 * <path>/login` checks the key with the module's ApiKeyAdminGuard, stores a random session on the server
 * (`ai_admin_sessions`) and sets its token as the cookie (HttpOnly, SameSite=Strict, Secure on https,
 * Path = the admin path), `POST <path>/logout` revokes it and clears the cookie. Wrong keys are logged
 * and limited per client address (LoginThrottle: 429 with Retry-After).
 * Not behind the guard (it is how one gets past it); posts from another site are refused. @internal
 */
@ApiExcludeController()
export class DurableLoginController implements OnModuleInit {
  private readonly logger = new Logger('DurableAdmin');
  private readonly throttle = new LoginThrottle();

  constructor(
    private readonly guard: AdminGuardRef,
    @Inject(DURABLE_ADMIN_OPTIONS) private readonly options: ResolvedAdminOptions,
    private readonly sessions: AdminSessionStore,
  ) {}

  /** The guard checks sign-in cookies against the sessions stored on the server (every pod sees them). */
  async onModuleInit(): Promise<void> {
    const guard = await this.guard.instance();
    if (guard instanceof ApiKeyAdminGuard && this.options.login)
      attachAdminSessions(guard, this.sessions, this.options.login.sessionTtlMs);
  }

  @Get('login')
  form(@Req() req: any, @Res() res: any): void {
    send(res, HttpStatus.OK, LOGIN_PAGE_HEADERS, renderLoginPage(adminBaseOf(req, /\/login$/)));
  }

  @Post('login')
  async login(@Req() req: any, @Res() res: any): Promise<void> {
    const base = adminBaseOf(req, /\/login$/);
    const page = (status: number, message: string) =>
      send(res, status, LOGIN_PAGE_HEADERS, renderLoginPage(base, message));
    const crossSite = crossSiteProblem(req);
    if (crossSite)
      return page(HttpStatus.FORBIDDEN, `Refused: this sign-in did not come from this site (${crossSite}).`);
    const client = clientOf(req);
    const guard = await this.guard.instance();
    // One count per client for the wrong keys of the sign-in page and of the API key header.
    const throttle = guard instanceof ApiKeyAdminGuard ? keyThrottleOf(guard) : this.throttle;
    const wait = throttle.retryAfterMs(client);
    if (wait > 0) {
      const all = throttle.refusedByAll(client);
      // The first refusal of a lockout, then every 100th: a flood cannot flood the log.
      if (throttle.refused(client) % 100 === 1)
        this.logger.warn(
          `admin sign-in refused for ${client}: too many wrong keys${all ? ' from all addresses' : ''} ` +
            `(retry in ${Math.ceil(wait / 1000)} s)`,
        );
      return send(
        res,
        HttpStatus.TOO_MANY_REQUESTS,
        { ...LOGIN_PAGE_HEADERS, 'Retry-After': String(Math.ceil(wait / 1000)) },
        renderLoginPage(base, 'Too many wrong keys from here: try again later.'),
      );
    }
    const key: unknown = req?.body?.key;
    if (typeof key !== 'string' || !key) return page(HttpStatus.BAD_REQUEST, 'Enter an API key.');
    if (!(guard instanceof ApiKeyAdminGuard)) {
      return page(
        HttpStatus.INTERNAL_SERVER_ERROR,
        'Sign-in needs the admin module to use ApiKeyAdminGuard.',
      );
    }
    const ttlMs = this.options.login ? this.options.login.sessionTtlMs : 0;
    const session = await issueAdminSession(guard, key);
    if (!session) {
      const n = throttle.failed(client);
      this.logger.warn(`admin sign-in with an unknown key from ${client} (${n} in the last 5 min)`);
      return page(HttpStatus.UNAUTHORIZED, 'Unknown API key.');
    }
    throttle.succeeded(client);
    send(res, HttpStatus.SEE_OTHER, {
      ...LOGIN_PAGE_HEADERS,
      Location: base || '/',
      'Set-Cookie': sessionCookie(session, base, Math.floor(ttlMs / 1000), isHttps(req)),
    });
  }

  @Post('logout')
  async logout(@Req() req: any, @Res() res: any): Promise<void> {
    const base = adminBaseOf(req, /\/logout$/);
    const crossSite = crossSiteProblem(req);
    if (crossSite) {
      return send(
        res,
        HttpStatus.FORBIDDEN,
        LOGIN_PAGE_HEADERS,
        renderLoginPage(base, `Refused (${crossSite}).`),
      );
    }
    // The session ends on the server: its cookie, replayed, no longer opens anything.
    const guard = await this.guard.instance();
    if (guard instanceof ApiKeyAdminGuard) await revokeAdminSessions(guard, req);
    send(res, HttpStatus.SEE_OTHER, {
      ...LOGIN_PAGE_HEADERS,
      Location: `${base}/login`,
      'Set-Cookie': sessionCookie('', base, 0, isHttps(req)),
    });
  }
}
