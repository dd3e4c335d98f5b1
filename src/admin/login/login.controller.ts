import { Get, HttpStatus, Inject, Post, Req, Res } from '@nestjs/common';
import { ApiExcludeController } from '../../nest/openapi';
import { AdminGuardRef } from '../admin-guard.ref';
import { DURABLE_ADMIN_OPTIONS } from '../admin.constants';
import type { ResolvedAdminOptions } from '../admin-options.interface';
import { ApiKeyAdminGuard, issueAdminSession } from '../api-key-admin.guard';
import { crossSiteProblem, isHttps, sessionCookie } from './admin-session';
import { adminBaseOf, LOGIN_PAGE_HEADERS, renderLoginPage, send } from './login-page';

/**
 * The sign-in page of the admin module (`login: true`): `GET <path>/login` shows a form, `POST
 * <path>/login` checks the key with the module's ApiKeyAdminGuard and sets the session cookie
 * (HttpOnly, SameSite=Strict, Secure on https, Path = the admin path), `POST <path>/logout` clears it.
 * Not behind the guard (it is how one gets past it); posts from another site are refused. @internal
 */
@ApiExcludeController()
export class DurableLoginController {
  constructor(
    private readonly guard: AdminGuardRef,
    @Inject(DURABLE_ADMIN_OPTIONS) private readonly options: ResolvedAdminOptions,
  ) {}

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
    const key: unknown = req?.body?.key;
    if (typeof key !== 'string' || !key) return page(HttpStatus.BAD_REQUEST, 'Enter an API key.');
    const guard = await this.guard.instance();
    if (!(guard instanceof ApiKeyAdminGuard)) {
      return page(
        HttpStatus.INTERNAL_SERVER_ERROR,
        'Sign-in needs the admin module to use ApiKeyAdminGuard.',
      );
    }
    const ttlMs = this.options.login ? this.options.login.sessionTtlMs : 0;
    const session = issueAdminSession(guard, key, ttlMs);
    if (!session) return page(HttpStatus.UNAUTHORIZED, 'Unknown API key.');
    send(res, HttpStatus.SEE_OTHER, {
      ...LOGIN_PAGE_HEADERS,
      Location: base || '/',
      'Set-Cookie': sessionCookie(session, base, Math.floor(ttlMs / 1000), isHttps(req)),
    });
  }

  @Post('logout')
  logout(@Req() req: any, @Res() res: any): void {
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
    send(res, HttpStatus.SEE_OTHER, {
      ...LOGIN_PAGE_HEADERS,
      Location: `${base}/login`,
      'Set-Cookie': sessionCookie('', base, 0, isHttps(req)),
    });
  }
}
