import type { CanActivate, FactoryProvider, ModuleMetadata, Type } from '@nestjs/common';

/** The part of a prom-client `Registry` the module uses (so the types need no prom-client import). */
export interface MetricsRegistryLike {
  registerMetric(metric: any): void;
  metrics(): Promise<string>;
  readonly contentType: string;
}

/** Prometheus metrics (prom-client). */
export interface DurableMetricsOptions {
  /** Route of the Prometheus text endpoint. Default `metrics` (served at `/metrics`). */
  path?: string;
  /** Metric name prefix. Default `durable_`. */
  prefix?: string;
  /** Register on this prom-client Registry (e.g. `register`, the global default). Default: a new one. */
  registry?: MetricsRegistryLike;
  /** Also collect prom-client's process metrics (CPU, memory, event loop) on the registry. Default false. */
  collectDefaultMetrics?: boolean;
  /** Database-derived gauges (runs by status, backlog, in-doubt) are cached this long. Default 5000 ms. */
  snapshotTtlMs?: number;
  /** Buckets of the step and attempt duration histograms, in seconds. */
  buckets?: number[];
  /**
   * Protects the metrics route, like the admin module's `guard`: a Nest `CanActivate` class (resolved
   * with the app's DI) or an instance, e.g. `new ApiKeyAdminGuard({...})` (Prometheus sends it as
   * `authorization: { credentials: <key> }`, a Bearer header). Default: none, the route is open, since
   * most scrapers send no credentials; it shows counts and timings, never run data. Guard it when the
   * port is reachable from outside the network your scrapers live in (workflow names, backlog and
   * failure rates are business information), at the cost of configuring every scraper with a secret.
   */
  guard?: Type<CanActivate> | CanActivate;
}

/** OpenTelemetry spans through `@opentelemetry/api` (no-op until the app installs an SDK). */
export interface DurableTracingOptions {
  /** Tracer name. Default `nestjs-durable-execution`. */
  tracerName?: string;
}

/** Health indicators for `@nestjs/terminus`. */
export interface DurableHealthOptions {
  /** Route of the health endpoint. Default `health` under the admin path, or `durable/health` standalone. */
  path?: string;
  /** The backlog check is down when the oldest due run has waited longer than this. Default 5 min. */
  maxBacklogAgeMs?: number;
  /** The worker check is down when its loop has not claimed for this long. Default 24 × pollIntervalMs (min 10 s). */
  workerStaleAfterMs?: number;
  /** The database check is down when `select 1` takes longer. Default 2000 ms. */
  databaseTimeoutMs?: number;
  /**
   * Put raw details in the checks: the database's error text, this worker's id (`host:pid:…`) and its
   * last claim error. Default false: the endpoint is not behind the admin guard, so a failing check
   * says only `database unreachable` and the worker check gives no id or error text. Set it when the
   * health route is guarded or internal (or when you call `DurableHealthIndicator` from your own
   * guarded endpoint).
   */
  detailed?: boolean;
  /**
   * Protects the health route, like the admin module's `guard` (a `CanActivate` class resolved with the
   * app's DI, or an instance). Default: none, since Kubernetes probes send no credentials. A guarded
   * route may then show `detailed` output; `detailed` stays off unless you set it.
   */
  guard?: Type<CanActivate> | CanActivate;
}

/** Options of `DurableObservabilityModule.forRoot()` (or `observability` of the admin module). */
export interface DurableObservabilityOptions {
  /** `false` turns metrics off. Default on (needs prom-client). */
  metrics?: DurableMetricsOptions | false;
  /** `false` turns tracing off. Default on when @opentelemetry/api is installed. */
  tracing?: DurableTracingOptions | false;
  /** `false` turns the health endpoint off. Default on (needs @nestjs/terminus). */
  health?: DurableHealthOptions | false;
}

/**
 * The routes of the observability module, fixed when the module is built (before any factory runs):
 * whether each one is mounted and where. `tracing: false` leaves the tracing provider out.
 */
export interface DurableObservabilityRoutes {
  /** `false`: no metrics route (and no prom-client needed). Default mounted at `metrics`. */
  metrics?: { path?: string } | false;
  /** `false`: no health route (and no @nestjs/terminus needed). Default mounted at `durable/health` (`health` under the admin path). */
  health?: { path?: string } | false;
  /** `false`: no tracing at all. Default: tracing when @opentelemetry/api is installed (the factory may still return `tracing: false`). */
  tracing?: false;
}

/**
 * Options of `DurableObservabilityModule.forRootAsync`: the routes here, everything else (guards,
 * registry, thresholds, `detailed`) from the factory. The factory's result may leave `metrics.path`,
 * `health.path` and the on/off of `metrics` and `health` out or repeat them; a different value fails the
 * bootstrap with `MountMismatchError`.
 */
export interface DurableObservabilityAsyncOptions
  extends DurableObservabilityRoutes, Pick<ModuleMetadata, 'imports'> {
  /** Providers passed to `useFactory`, e.g. `[ConfigService]`. */
  inject?: FactoryProvider['inject'];
  /** The options; the route options in its result must match the ones above. */
  useFactory: (...deps: any[]) => DurableObservabilityOptions | Promise<DurableObservabilityOptions>;
}
