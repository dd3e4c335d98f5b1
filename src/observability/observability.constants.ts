/** Injection token of the observability options. */
export const DURABLE_OBSERVABILITY_OPTIONS = Symbol('durable-execution:observability-options');
/** Injection token of terminus's HealthCheckService (resolved lazily: @nestjs/terminus is optional). */
export const DURABLE_HEALTH_CHECK_SERVICE = Symbol('durable-execution:health-check-service');
