import { InvalidOptionsError } from '../errors/invalid-options.error';
import { MountMismatchError } from '../errors/mount-mismatch.error';
import { guardProblem } from '../nest/delegate-guard';
import { routePathProblem, trimPath } from '../nest/mount-controller';
import {
  checkObservabilityOptions,
  ObservabilityMount,
  observabilityMount,
  OptionsOwner,
} from '../observability/observability-mount';
import type { DurableObservabilityOptions } from '../observability/observability-options.interface';
import type {
  DurableAdminModuleAsyncOptions,
  DurableAdminModuleOptions,
  ResolvedAdminOptions,
} from './admin-options.interface';
import { ApiKeyAdminGuard } from './api-key-admin.guard';

const ADMIN = 'DurableAdminModule';
const OBSERVABILITY: OptionsOwner = { moduleName: ADMIN, prefix: 'observability.' };
const TWELVE_HOURS = 12 * 3_600_000;

/** What the admin module mounts, decided when it is built. @internal */
export interface AdminMount {
  path: string;
  login: boolean;
  observability: ObservabilityMount | false;
}

/** The mount from forRoot's options or forRootAsync's own options; refuses route patterns. @internal */
export function adminMount(o: DurableAdminModuleOptions | DurableAdminModuleAsyncOptions): AdminMount {
  const pathProblem = routePathProblem('path', o?.path);
  if (pathProblem) throw new InvalidOptionsError([`${ADMIN}: ${pathProblem}`]);
  const path = trimPath(o?.path ?? 'durable');
  const obs = o?.observability;
  return {
    path,
    login: !!o?.login,
    observability:
      obs === false
        ? false
        : observabilityMount(obs ?? {}, path ? `${path}/health` : 'health', OBSERVABILITY),
  };
}

/** A guard that can sign a browser in: an ApiKeyAdminGuard instance, or that class or a subclass. */
function isApiKeyGuard(guard: unknown): boolean {
  return (
    guard instanceof ApiKeyAdminGuard ||
    guard === ApiKeyAdminGuard ||
    (typeof guard === 'function' && guard.prototype instanceof ApiKeyAdminGuard)
  );
}

/**
 * Checks the options (the admin surface never starts open by accident) and, for a forRootAsync factory's
 * result, that they do not move a route the module mounted. @internal
 */
export function resolveAdminOptions(o: DurableAdminModuleOptions, built?: AdminMount): ResolvedAdminOptions {
  const problems: string[] = [];
  const guard = o?.guard;
  // forRootAsync: the mount says whether the sign-in page is there when the factory does not.
  const login = o?.login ?? built?.login ?? false;
  if (!guard && o?.allowAnonymous !== true) {
    problems.push(
      `${ADMIN} needs a guard (guard: YourAuthGuard or new ApiKeyAdminGuard({...})), or allowAnonymous: true to serve it to anyone who can reach it`,
    );
  }
  if (guard && o.allowAnonymous) problems.push(`${ADMIN}: give either guard or allowAnonymous, not both`);
  const bad = guardProblem('guard', guard);
  if (bad) problems.push(`${ADMIN}: ${bad}`);
  const pathProblem = routePathProblem('path', o?.path);
  if (pathProblem) problems.push(`${ADMIN}: ${pathProblem}`);
  if (o?.operator !== undefined && typeof o.operator !== 'function') {
    problems.push(`${ADMIN}: operator must be a function (request) => string`);
  }
  const ttl = typeof o?.login === 'object' && o.login ? o.login.sessionTtlMs : undefined;
  if (ttl !== undefined && (!Number.isInteger(ttl) || ttl < 1000)) {
    problems.push(`${ADMIN}: login.sessionTtlMs must be an integer of at least 1000 ms (got ${String(ttl)})`);
  }
  if (login && guard && !isApiKeyGuard(guard)) {
    problems.push(
      `${ADMIN}: login works with ApiKeyAdminGuard only (it signs a browser in with an API key); with your own guard, sign users in your own way`,
    );
  }
  if (login && !guard) problems.push(`${ADMIN}: login needs guard: new ApiKeyAdminGuard({...})`);
  const schemes = o?.openApi?.securitySchemes;
  if (schemes !== undefined) {
    const entries = schemes && typeof schemes === 'object' ? Object.entries(schemes) : [];
    if (!entries.length || entries.some(([, s]) => !s || typeof s.type !== 'string')) {
      problems.push(
        `${ADMIN}: openApi.securitySchemes must map names to OpenAPI security schemes ({ type, ... })`,
      );
    }
  }
  if (problems.length) throw new InvalidOptionsError(problems);
  const mount = built ?? adminMount(o);
  checkMount(o, mount);
  return {
    ...o,
    path: mount.path,
    login: login ? { sessionTtlMs: ttl ?? TWELVE_HOURS } : false,
  };
}

/** A factory's result must not move what the module mounted. */
function checkMount(o: DurableAdminModuleOptions, mount: AdminMount): void {
  if (o.path !== undefined && trimPath(o.path) !== mount.path) {
    throw new MountMismatchError(ADMIN, 'path', mount.path, o.path);
  }
  if (o.login !== undefined && !!o.login !== mount.login) {
    throw new MountMismatchError(ADMIN, 'login', mount.login, !!o.login);
  }
  adminObservabilityOptions(o, mount);
}

/** The observability options of an admin module's (factory's) options, checked against its mount. @internal */
export function adminObservabilityOptions(
  o: DurableAdminModuleOptions | undefined,
  mount: AdminMount,
): DurableObservabilityOptions | false {
  const given = o?.observability;
  if (mount.observability === false) {
    if (given !== undefined && given !== false) {
      throw new MountMismatchError(ADMIN, 'observability', false, true);
    }
    return false;
  }
  if (given === false) throw new MountMismatchError(ADMIN, 'observability', true, false);
  return checkObservabilityOptions(given, mount.observability, OBSERVABILITY);
}
