import { AdminSessionStore } from '../store/admin-sessions.store';
import { DynamicModule, Module, Provider, Type } from '@nestjs/common';
import { observabilityModule } from '../observability/durable-observability.module';
import { DURABLE_OBSERVABILITY_OPTIONS } from '../observability/observability.constants';
import { mountController } from '../nest/mount-controller';
import { AdminAccessGuard } from './admin-access.guard';
import { AdminGuardRef } from './admin-guard.ref';
import { DURABLE_ADMIN_OPTIONS } from './admin.constants';
import type { DurableAdminModuleAsyncOptions, DurableAdminModuleOptions } from './admin-options.interface';
import { AdminRedactor } from './admin-redactor';
import { AdminRunsService } from './admin-runs.service';
import { AdminRunsStore } from '../store/admin-runs.store';
import { DurableInspectorController } from './controllers/inspector-page.controller';
import { DurableRunActionsController } from './controllers/run-actions.controller';
import { DurableRunsApiController } from './controllers/runs-api.controller';
import { DurableSchedulesController } from './controllers/schedules.controller';
import { DurableLoginController } from './login/login.controller';
import {
  adminMount,
  AdminMount,
  adminObservabilityOptions,
  resolveAdminOptions,
} from './resolve-admin-options';

/** Where a forRootAsync factory's result is kept for the admin and observability options. */
const ADMIN_FACTORY_RESULT = Symbol('durable-execution:admin-factory-result');

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
    const mount = adminMount(resolved);
    const observability = adminObservabilityOptions(resolved, mount);
    return adminModule(
      mount,
      { provide: DURABLE_ADMIN_OPTIONS, useValue: resolved },
      observability === false
        ? undefined
        : { provide: DURABLE_OBSERVABILITY_OPTIONS, useValue: observability },
      [],
    );
  }

  /**
   * The same, with options from a factory: the guard, its keys, `operator` and the observability settings
   * (guards, thresholds) can come from ConfigService. Routes are mounted when the module is built, before
   * the factory runs: `path`, `login` and the observability routes (`metrics.path`, `health.path`, or
   * `false`) are given here, next to `useFactory`. The factory may leave them out or repeat them; a
   * different value fails the bootstrap with `MountMismatchError`, and invalid options with
   * `InvalidOptionsError`, as `forRoot` does.
   * @example
   * ```ts
   * DurableAdminModule.forRootAsync({
   *   path: 'ops/durable',
   *   login: true,
   *   inject: [ConfigService],
   *   useFactory: (config: ConfigService) => ({
   *     guard: new ApiKeyAdminGuard({ keys: { [config.getOrThrow<string>('OPS_KEY')]: 'oncall' } }),
   *   }),
   * })
   * ```
   */
  static forRootAsync(options: DurableAdminModuleAsyncOptions): DynamicModule {
    const mount = adminMount(options);
    // One module runs the app's factory; the admin and the observability options both read its result.
    const factoryResult: DynamicModule = {
      module: class DurableAdminOptionsFactory {},
      imports: options.imports ?? [],
      providers: [
        { provide: ADMIN_FACTORY_RESULT, useFactory: options.useFactory, inject: options.inject ?? [] },
      ],
      exports: [ADMIN_FACTORY_RESULT],
    };
    return adminModule(
      mount,
      {
        provide: DURABLE_ADMIN_OPTIONS,
        useFactory: (raw: DurableAdminModuleOptions) => resolveAdminOptions(raw, mount),
        inject: [ADMIN_FACTORY_RESULT],
      },
      mount.observability === false
        ? undefined
        : {
            provide: DURABLE_OBSERVABILITY_OPTIONS,
            useFactory: (raw: DurableAdminModuleOptions) => adminObservabilityOptions(raw, mount),
            inject: [ADMIN_FACTORY_RESULT],
          },
      [factoryResult],
    );
  }
}

/** The admin module as `mount` says, with its options (and its observability's) from these providers. */
function adminModule(
  mount: AdminMount,
  options: Provider,
  observability: Provider | undefined,
  imports: DynamicModule[],
): DynamicModule {
  const { path } = mount;
  const api = path ? `${path}/api` : 'api';
  const controllers: Type<object>[] = [
    mountController(DurableRunsApiController, api),
    mountController(DurableRunActionsController, api),
    mountController(DurableSchedulesController, api),
    mountController(DurableInspectorController, path),
  ];
  if (mount.login) controllers.push(mountController(DurableLoginController, path));
  return {
    module: DurableAdminModule,
    imports: [
      ...imports,
      ...(mount.observability === false || !observability
        ? []
        : [observabilityModule(mount.observability, observability, imports)]),
    ],
    providers: [
      options,
      AdminGuardRef,
      AdminAccessGuard,
      AdminRedactor,
      AdminRunsService,
      AdminRunsStore,
      AdminSessionStore,
    ],
    controllers,
  };
}
