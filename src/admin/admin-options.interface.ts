import type { CanActivate, FactoryProvider, ModuleMetadata, Type } from '@nestjs/common';
import type {
  DurableObservabilityOptions,
  DurableObservabilityRoutes,
} from '../observability/observability-options.interface';

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
  /**
   * A sign-in page for browsers at `/<path>/login` (ApiKeyAdminGuard only): it takes an API key and
   * keeps a session derived from it in an HttpOnly, SameSite=Strict cookie scoped to the admin path
   * (Secure on https), which ApiKeyAdminGuard then accepts like the header; `POST /<path>/logout` clears
   * it. Actions sent with that cookie must carry the `X-Durable-Admin` header (the inspector's buttons
   * do) and come from the same origin. Default off.
   */
  login?: boolean | DurableAdminLoginOptions;
  /** How the admin API's security appears in the app's OpenAPI document (`addDurableAdminSecurity`). */
  openApi?: DurableAdminOpenApiOptions;
}

/** Options of the admin sign-in page (`login`). */
export interface DurableAdminLoginOptions {
  /**
   * How long a sign-in lasts (cookie `Max-Age`, and the expiry signed into the session), at least
   * 1000 ms. Default 12 h.
   */
  sessionTtlMs?: number;
}

/** An OpenAPI 3 security scheme object (`type: 'apiKey' | 'http' | 'oauth2' | 'openIdConnect'`, ...). */
export type DurableSecurityScheme = { type: string; [field: string]: unknown };

/** The admin API's security in the app's OpenAPI document. */
export interface DurableAdminOpenApiOptions {
  /**
   * The schemes the admin API operations require (any one of them), declared under
   * `components.securitySchemes` by `addDurableAdminSecurity(app, document)`. Default: with
   * ApiKeyAdminGuard, its header as an `apiKey` scheme and `Authorization: Bearer` as an `http` scheme
   * (plus the sign-in cookie when `login` is on); with any other guard, one generic `http` bearer scheme
   * named `durable-admin`. Give the schemes your guard really reads, e.g. a JWT under the name your
   * DocumentBuilder already declares (`bearer`), as an `http` scheme with `scheme: 'bearer'`.
   */
  securitySchemes?: Record<string, DurableSecurityScheme>;
}

/**
 * Options of `DurableAdminModule.forRootAsync`: the routes here (they are mounted when the module is
 * built, before the factory runs), everything else from the factory. The factory's result may leave
 * `path`, `login` and the routes of `observability` out or repeat them; a different value fails the
 * bootstrap with `MountMismatchError`.
 */
export interface DurableAdminModuleAsyncOptions extends Pick<ModuleMetadata, 'imports'> {
  /** Mount path, as in `forRoot`. Default `durable`. */
  path?: string;
  /** Mounts the sign-in page (the factory's guard must then be an ApiKeyAdminGuard). Default false. */
  login?: boolean;
  /** The observability routes (`metrics.path`, `health.path`, on or off); `false` for none at all. */
  observability?: DurableObservabilityRoutes | false;
  /** Providers passed to `useFactory`, e.g. `[ConfigService]`. */
  inject?: FactoryProvider['inject'];
  /** The rest of the options: `guard` (or `allowAnonymous`), `operator`, `observability` settings, and so on. */
  useFactory: (...deps: any[]) => DurableAdminModuleOptions | Promise<DurableAdminModuleOptions>;
}

/** Options with defaults filled in. @internal */
export interface ResolvedAdminOptions extends DurableAdminModuleOptions {
  path: string;
  login: false | Required<DurableAdminLoginOptions>;
}
