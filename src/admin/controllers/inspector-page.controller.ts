import { RunRepository } from '../../api/run.repository';
import { Get, Header, Inject, Param, Query, Req, UseFilters, UseGuards, UsePipes } from '@nestjs/common';
import { AdminAccessGuard, operatorOf } from '../admin-access.guard';
import { AdminRunsService } from '../admin-runs.service';
import { adminValidationPipe } from '../admin-validation.pipe';
import { DURABLE_ADMIN_OPTIONS } from '../admin.constants';
import type { ResolvedAdminOptions } from '../admin-options.interface';
import { ListRunsQueryDto } from '../dto/list-runs-query.dto';
import { InspectorErrorFilter } from '../login/inspector-error.filter';
import { ApiExcludeController } from '../../nest/openapi';
import { INSPECTOR_CSP } from '../page/content-security-policy';
import { renderRunPage } from '../page/run-page';
import { renderRunsPage } from '../page/runs-page';
import { runIdPipe } from './uuid-param.pipe';

/** The request's path without query string and trailing slash (works under any global prefix). */
function pathOf(req: any): string {
  const url: string = req?.originalUrl ?? req?.url ?? '/';
  return url.split('?')[0].replace(/\/+$/, '');
}

/**
 * The run inspector: server-rendered HTML, one inline script, nothing loaded from elsewhere. With
 * `login` on, a browser that is not signed in gets the sign-in form (a 401).
 */
@ApiExcludeController()
@UseGuards(AdminAccessGuard)
@UsePipes(adminValidationPipe())
@UseFilters(InspectorErrorFilter)
export class DurableInspectorController {
  constructor(
    private readonly admin: AdminRunsService,
    @Inject(DURABLE_ADMIN_OPTIONS) private readonly options: ResolvedAdminOptions,
    private readonly repository: RunRepository,
  ) {}

  @Get()
  @Header('Content-Type', 'text/html; charset=utf-8')
  @Header('Cache-Control', 'no-store')
  @Header('X-Content-Type-Options', 'nosniff')
  @Header('Content-Security-Policy', INSPECTOR_CSP)
  async runs(@Query() query: ListRunsQueryDto, @Req() req: unknown): Promise<string> {
    const [page, stats, versions] = await Promise.all([
      this.admin.list(query),
      this.admin.stats(),
      this.repository.versions(),
    ]);
    return renderRunsPage(
      pathOf(req),
      operatorOf(req, this.options),
      query,
      page,
      stats,
      !!this.options.login,
      versions,
    );
  }

  @Get('runs/:id')
  @Header('Content-Type', 'text/html; charset=utf-8')
  @Header('Cache-Control', 'no-store')
  @Header('X-Content-Type-Options', 'nosniff')
  @Header('Content-Security-Policy', INSPECTOR_CSP)
  async run(@Param('id', runIdPipe()) id: string, @Req() req: unknown): Promise<string> {
    const detail = await this.admin.detail(id, undefined, false); // the page shows no checkpoint output
    const base = pathOf(req).replace(/\/runs\/[^/]+$/, '');
    return renderRunPage(base, operatorOf(req, this.options), detail, !!this.options.login);
  }
}
