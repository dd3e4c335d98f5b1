import type { CanActivate, Type } from '@nestjs/common';
import type { DurableObservabilityOptions } from '../observability/observability-options.interface';

/** Options of `DurableAdminModule.forRoot()`. Give exactly one of `guard` or `allowAnonymous: true`. */
export interface DurableAdminModuleOptions {
  /** Mount path: the inspector at `/<path>`, the REST API at `/<path>/api`. Default `durable`. */
  path?: string;
  /**
   * Decides who may use the admin API and page: the app's own guard (a class, resolved with the app's
   * DI, or an instance) or `new ApiKeyAdminGuard({...})`. Throw `UnauthorizedException` for "who are
   * you?" (401) and return false or throw `ForbiddenException` for "not you" (403).
   * `isDurableAdminAction(context)` tells a guard whether the request changes a run.
   */
  guard?: Type<CanActivate> | CanActivate;
  /** Serve without any guard (a local tool, a test). Must be said explicitly. */
  allowAnonymous?: boolean;
  /**
   * Who is acting, recorded as `by` in the event trail of every operator action. Default: what
   * ApiKeyAdminGuard set, else `request.user` (`username`, `email`, `name`, `id` or `sub`), else `anonymous`.
   */
  operator?: (request: any) => string | undefined;
  /** Metrics, traces and health; `false` if you import DurableObservabilityModule yourself. */
  observability?: DurableObservabilityOptions | false;
}

/** Options with defaults filled in. @internal */
export interface ResolvedAdminOptions extends DurableAdminModuleOptions {
  path: string;
}
