import { DynamicModule, Module, Provider, Type } from '@nestjs/common';
import type * as Terminus from '@nestjs/terminus';
import { DurableHealthIndicator } from './durable-health.indicator';
import { DurableMetrics } from './durable-metrics.service';
import { DurableTracing } from './durable-tracing.service';
import { DurableHealthController } from './health.controller';
import { DurableMetricsController } from './metrics.controller';
import { InvalidOptionsError } from '../errors/invalid-options.error';
import { mountController, routePathProblem, trimPath } from '../nest/mount-controller';
import { DURABLE_HEALTH_CHECK_SERVICE, DURABLE_OBSERVABILITY_OPTIONS } from './observability.constants';
import type { DurableObservabilityOptions } from './observability-options.interface';
import { loadOptional, tryLoadOptional } from '../nest/optional-dependency';

/**
 * Metrics (prom-client, `GET /metrics`), traces (@opentelemetry/api) and health (@nestjs/terminus) of
 * the engine. `DurableAdminModule` imports it for you; import it alone on worker pods without the
 * admin API. Needs `DurableExecutionModule` (global, the default) in the same app.
 * @example
 * ```ts
 * DurableObservabilityModule.forRoot({ metrics: { path: 'metrics' }, health: { maxBacklogAgeMs: 60_000 } })
 * ```
 */
@Module({})
export class DurableObservabilityModule {
  static forRoot(options: DurableObservabilityOptions = {}): DynamicModule {
    return observabilityModule(options, 'durable/health');
  }
}

/** The module with the health route defaulting under `healthDefault` (the admin path). @internal */
export function observabilityModule(
  options: DurableObservabilityOptions,
  healthDefault: string,
): DynamicModule {
  const problems = [
    routePathProblem('metrics.path', options.metrics ? options.metrics.path : undefined),
    routePathProblem('health.path', options.health ? options.health.path : undefined),
  ].filter((p): p is string => p !== undefined);
  if (problems.length) throw new InvalidOptionsError(problems.map((p) => `DurableObservabilityModule: ${p}`));
  const providers: Provider[] = [
    { provide: DURABLE_OBSERVABILITY_OPTIONS, useValue: options },
    DurableHealthIndicator,
  ];
  const controllers: Type<object>[] = [];
  const imports: DynamicModule[] = [];
  const exported: Array<Type<object>> = [DurableHealthIndicator];
  if (options.metrics !== false) {
    loadOptional('prom-client', 'DurableObservabilityModule metrics (metrics: false to skip)');
    providers.push(DurableMetrics);
    exported.push(DurableMetrics);
    controllers.push(mountController(DurableMetricsController, trimPath(options.metrics?.path ?? 'metrics')));
  }
  // Tracing is on by default only when the API package is there; asked for explicitly, it must be.
  if (options.tracing !== false && (options.tracing || tryLoadOptional('@opentelemetry/api'))) {
    providers.push(DurableTracing);
    exported.push(DurableTracing);
  }
  if (options.health !== false) {
    const terminus = loadOptional<typeof Terminus>(
      '@nestjs/terminus',
      'DurableObservabilityModule health (health: false to skip)',
    );
    imports.push(terminus.TerminusModule.forRoot());
    providers.push({ provide: DURABLE_HEALTH_CHECK_SERVICE, useExisting: terminus.HealthCheckService });
    controllers.push(
      mountController(DurableHealthController, trimPath(options.health?.path ?? healthDefault)),
    );
  }
  return { module: DurableObservabilityModule, imports, providers, controllers, exports: exported };
}
