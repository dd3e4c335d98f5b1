import { DynamicModule, Module, Provider, Type } from '@nestjs/common';
import type * as Terminus from '@nestjs/terminus';
import { DurableHealthIndicator } from './durable-health.indicator';
import { DurableMetrics } from './durable-metrics.service';
import { DurableTracing } from './durable-tracing.service';
import { DurableHealthController } from './health.controller';
import { DurableMetricsController } from './metrics.controller';
import { mountController } from '../nest/mount-controller';
import { DURABLE_HEALTH_CHECK_SERVICE, DURABLE_OBSERVABILITY_OPTIONS } from './observability.constants';
import type {
  DurableObservabilityAsyncOptions,
  DurableObservabilityOptions,
} from './observability-options.interface';
import { loadOptional } from '../util/optional-dependency';
import {
  checkObservabilityOptions,
  ObservabilityMount,
  observabilityMount,
  OptionsOwner,
} from './observability-mount';
import { HealthAccessGuard, MetricsAccessGuard } from './route-access.guard';

const STANDALONE: OptionsOwner = { moduleName: 'DurableObservabilityModule', prefix: '' };

/**
 * Metrics (prom-client, `GET /metrics`), traces (@opentelemetry/api) and health (@nestjs/terminus) of
 * the engine. `DurableAdminModule` imports it for you; import it alone on worker pods without the
 * admin API. Needs `DurableExecutionModule` (global, the default) in the same app. The metrics and
 * health routes are open unless `metrics.guard` / `health.guard` is set.
 * @example
 * ```ts
 * DurableObservabilityModule.forRoot({ metrics: { path: 'metrics' }, health: { maxBacklogAgeMs: 60_000 } })
 * ```
 */
@Module({})
export class DurableObservabilityModule {
  static forRoot(options: DurableObservabilityOptions = {}): DynamicModule {
    const mount = observabilityMount(options, 'durable/health', STANDALONE);
    const checked = checkObservabilityOptions(options, mount, STANDALONE);
    return observabilityModule(mount, { provide: DURABLE_OBSERVABILITY_OPTIONS, useValue: checked });
  }

  /**
   * The same, with options from a factory (e.g. guards and thresholds from ConfigService). Routes are
   * mounted when the module is built, before the factory runs: give `metrics.path`, `health.path` (or
   * `metrics: false`, `health: false`) here, not in the factory's result. The factory may leave them out
   * or repeat them; a different value fails the bootstrap with `MountMismatchError`.
   * @example
   * ```ts
   * DurableObservabilityModule.forRootAsync({
   *   metrics: { path: 'metrics' },
   *   inject: [ConfigService],
   *   useFactory: (config: ConfigService) => ({
   *     metrics: { guard: new ApiKeyAdminGuard({ keys: { [config.getOrThrow('SCRAPE_KEY')]: 'prometheus' } }) },
   *   }),
   * })
   * ```
   */
  static forRootAsync(options: DurableObservabilityAsyncOptions): DynamicModule {
    const mount = observabilityMount(options, 'durable/health', STANDALONE);
    const module = observabilityModule(mount, {
      provide: DURABLE_OBSERVABILITY_OPTIONS,
      useFactory: async (...deps: unknown[]) =>
        checkObservabilityOptions(await options.useFactory(...deps), mount, STANDALONE),
      inject: options.inject ?? [],
    });
    return { ...module, imports: [...(options.imports ?? []), ...(module.imports ?? [])] };
  }
}

/**
 * The module as `mount` says, with its options from `optionsProvider` (a value, or a factory checked
 * against the mount). The admin module builds it too. @internal
 */
export function observabilityModule(
  mount: ObservabilityMount,
  optionsProvider: Provider,
  imports: NonNullable<DynamicModule['imports']> = [],
): DynamicModule {
  const providers: Provider[] = [optionsProvider, DurableHealthIndicator];
  const controllers: Type<object>[] = [];
  const exported: Array<Type<object>> = [DurableHealthIndicator];
  const modules = [...imports];
  if (mount.metrics !== false) {
    loadOptional('prom-client', 'DurableObservabilityModule metrics (metrics: false to skip)');
    providers.push(DurableMetrics, MetricsAccessGuard);
    exported.push(DurableMetrics);
    controllers.push(mountController(DurableMetricsController, mount.metrics));
  }
  if (mount.tracing) {
    providers.push(DurableTracing);
    exported.push(DurableTracing);
  }
  if (mount.health !== false) {
    const terminus = loadOptional<typeof Terminus>(
      '@nestjs/terminus',
      'DurableObservabilityModule health (health: false to skip)',
    );
    modules.push(terminus.TerminusModule.forRoot());
    providers.push(
      { provide: DURABLE_HEALTH_CHECK_SERVICE, useExisting: terminus.HealthCheckService },
      HealthAccessGuard,
    );
    controllers.push(mountController(DurableHealthController, mount.health));
  }
  return { module: DurableObservabilityModule, imports: modules, providers, controllers, exports: exported };
}
