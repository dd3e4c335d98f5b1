/**
 * `nestjs-durable-execution/observability`: the opt-in metrics (prom-client), traces (OpenTelemetry) and
 * health check (`@nestjs/terminus`) of `DurableObservabilityModule`, and the observers they are built on
 * (`DurableObservers`, for metrics or traces of your own). See docs/OPERATIONS.md ("Metrics", "Traces",
 * "Health", "Custom observers").
 * @packageDocumentation
 */
export { DurableObservabilityModule } from './durable-observability.module';
export type {
  DurableHealthOptions,
  DurableMetricsOptions,
  DurableObservabilityAsyncOptions,
  DurableObservabilityOptions,
  DurableObservabilityRoutes,
  DurableTracingOptions,
  MetricsRegistryLike,
} from './observability-options.interface';
export { DurableObservers } from '../engine/durable-observers';
export type {
  DurableObserver,
  ReconcileOutcome,
  RunAttemptInfo,
  RunAttemptOutcome,
  StepInfo,
  StepOutcome,
  WorkerTickInfo,
} from '../interfaces/durable-observer.interface';
export { DATABASE_UNREACHABLE, DurableHealthIndicator } from './durable-health.indicator';
export type { DurableHealthResult } from './durable-health.indicator';
export type { ReplicationMode } from '../util/replication-report';
// Thrown at boot: a peer dependency the module needs is not installed; its mount does not fit the app.
export { MissingDependencyError } from '../errors/missing-dependency.error';
export { MountMismatchError } from '../errors/mount-mismatch.error';
