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
