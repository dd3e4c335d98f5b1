import { DynamicModule, Module } from '@nestjs/common';
import { InvalidOptionsError } from '../errors/invalid-options.error';
import { observabilityModule } from '../observability/durable-observability.module';
import { mountController, routePathProblem, trimPath } from '../nest/mount-controller';
import { AdminAccessGuard } from './admin-access.guard';
import { DURABLE_ADMIN_OPTIONS } from './admin.constants';
import type { DurableAdminModuleOptions, ResolvedAdminOptions } from './admin-options.interface';
import { AdminRedactor } from './admin-redactor';
import { AdminRunsService } from './admin-runs.service';
import { AdminRunsStore } from '../store/admin-runs.store';
import { DurableInspectorController } from './controllers/inspector-page.controller';
import { DurableRunActionsController } from './controllers/run-actions.controller';
import { DurableRunsApiController } from './controllers/runs-api.controller';

/** Checks the options; the admin surface never starts open by accident. @internal */
export function resolveAdminOptions(o: DurableAdminModuleOptions): ResolvedAdminOptions {
  const problems: string[] = [];
  const guard = o?.guard;
  if (!guard && o?.allowAnonymous !== true) {
    problems.push(
      'DurableAdminModule needs a guard (guard: YourAuthGuard or new ApiKeyAdminGuard({...})), or allowAnonymous: true to serve it to anyone who can reach it',
    );
  }
  if (guard && o.allowAnonymous)
    problems.push('DurableAdminModule: give either guard or allowAnonymous, not both');
  if (
    guard &&
    typeof guard !== 'function' &&
    typeof (guard as { canActivate?: unknown }).canActivate !== 'function'
  ) {
    problems.push('DurableAdminModule: guard must be a CanActivate class or instance');
  }
  const pathProblem = routePathProblem('path', o?.path);
  if (pathProblem) problems.push(`DurableAdminModule: ${pathProblem}`);
  if (o?.operator !== undefined && typeof o.operator !== 'function') {
    problems.push('DurableAdminModule: operator must be a function (request) => string');
  }
  if (problems.length) throw new InvalidOptionsError(problems);
  return { ...o, path: trimPath(o.path ?? 'durable') };
}

/**
 * The operator surface, opt-in: a REST API under `/<path>/api` (list, inspect, cancel, retry, approve,
 * reject, resolve, signal), the run inspector page at `/<path>`, `/metrics` and `/<path>/health`.
 * Refuses to start without a `guard` or an explicit `allowAnonymous: true`. Every action is recorded in
 * the run's event trail with who did it. Needs `DurableExecutionModule` (global, the default).
 * @example
 * ```ts
 * DurableAdminModule.forRoot({ path: 'ops/durable', guard: new ApiKeyAdminGuard({ keys: { [process.env.OPS_KEY!]: 'oncall' } }) })
 * ```
 */
@Module({})
export class DurableAdminModule {
  static forRoot(options: DurableAdminModuleOptions): DynamicModule {
    const resolved = resolveAdminOptions(options);
    const path = resolved.path;
    const api = path ? `${path}/api` : 'api';
    return {
      module: DurableAdminModule,
      imports:
        resolved.observability === false
          ? []
          : [observabilityModule(resolved.observability ?? {}, path ? `${path}/health` : 'health')],
      providers: [
        { provide: DURABLE_ADMIN_OPTIONS, useValue: resolved },
        AdminAccessGuard,
        AdminRedactor,
        AdminRunsService,
        AdminRunsStore,
      ],
      controllers: [
        mountController(DurableRunsApiController, api),
        mountController(DurableRunActionsController, api),
        mountController(DurableInspectorController, path),
      ],
    };
  }
}
