import { ArgumentsHost, Catch, Inject, Optional, UnauthorizedException } from '@nestjs/common';
import { AdminErrorFilter } from '../admin-error.filter';
import { DURABLE_ADMIN_OPTIONS } from '../admin.constants';
import type { ResolvedAdminOptions } from '../admin-options.interface';
import { adminBaseOf, LOGIN_PAGE_HEADERS, renderLoginPage, send } from './login-page';

/**
 * The inspector pages' errors: as AdminErrorFilter, except that with `login` on, a browser's 401 on a
 * page (a GET asking for HTML) is still a 401, with the sign-in form as its body. @internal
 */
@Catch()
export class InspectorErrorFilter extends AdminErrorFilter {
  @Optional()
  @Inject(DURABLE_ADMIN_OPTIONS)
  private readonly adminOptions?: ResolvedAdminOptions;

  override catch(exception: unknown, host: ArgumentsHost): void {
    if (this.adminOptions?.login && exception instanceof UnauthorizedException && host.getType() === 'http') {
      const req = host.switchToHttp().getRequest();
      const res = host.switchToHttp().getResponse();
      if (req?.method === 'GET' && /text\/html/.test(String(req.headers?.accept ?? ''))) {
        const base = adminBaseOf(req, /\/runs\/[^/]+$/);
        send(res, 401, LOGIN_PAGE_HEADERS, renderLoginPage(base, exception.message));
        return;
      }
    }
    super.catch(exception, host);
  }
}
