export { DurableExecutionModule } from './durable-execution.module';
export { DURABLE_EXECUTION_OPTIONS } from './durable-execution.constants';
export * from './options/durable-execution-options.interface';
export { REDACT_SURFACES, REDACTION_FAILED } from './options/redact';
export type { RedactHook, RedactKey, RedactSurface } from './options/redact';
export * from './interfaces/run.interface';
export * from './interfaces/step-options.interface';
export * from './errors';
export { DurableExceptionFilter, DURABLE_HTTP_STATUS } from './nest/durable-exception.filter';
export type { DurableErrorBody } from './nest/durable-exception.filter';
export { DurableStep } from './decorators/durable-step.decorator';
export { DurableWorkflow } from './decorators/durable-workflow.decorator';
export { IdempotentCommand } from './decorators/idempotent-command.decorator';
export * from './interfaces/command.interface';
export * from './interfaces/events.interface';
export { RunContext, currentRun } from './engine/run-context';
export { RunRepository } from './api/run.repository';
export { CheckpointService } from './store/checkpoint.service';
export { CommandGateway } from './api/command-gateway.service';
export type { CommandView } from './interfaces/command.interface';
export { LeaseService } from './store/lease.service';
export type { ClaimedRun, Fence } from './store/lease.service';
export { DurableRegistry } from './discovery/durable.registry';
export { DurableWorker } from './engine/worker.service';
export { Reconciler } from './maintenance/reconciler.service';
export type { ReconcileResult } from './maintenance/reconciler.service';
export {
  runDurableMigrations,
  revertDurableMigrations,
  durableMigrationStatus,
  DURABLE_MIGRATIONS_TABLE,
} from './store/run-migrations';
export type { DurableMigrationStatus } from './store/run-migrations';
export {
  DURABLE_EXECUTION_MIGRATIONS,
  CreateDurableExecutionSchema1764400000000,
  CommandApprovalStates1764500000000,
  HotLeaseRenewal1764600000000,
  ReplayOrder1764700000000,
  RunResultNotify1764800000000,
} from '../migrations';
export { DurableObservers } from './observability/durable-observers';
export * from './observability/durable-observer.interface';
export * from './observability/observability-options.interface';
export { DurableObservabilityModule } from './observability/durable-observability.module';
export { DurableMetrics } from './observability/durable-metrics.service';
export { DurableTracing } from './observability/durable-tracing.service';
export { DATABASE_UNREACHABLE, DurableHealthIndicator } from './observability/durable-health.indicator';
export type { DurableHealthResult } from './observability/durable-health.indicator';
export type { RunStats, Backlog } from './store/run-stats.reader';
export { DurableAdminModule } from './admin/durable-admin.module';
export type { DurableAdminModuleOptions } from './admin/admin-options.interface';
export { ApiKeyAdminGuard } from './admin/api-key-admin.guard';
export type { ApiKeyAdminGuardOptions, ApiKeyHolder } from './admin/api-key-admin.guard';
export { isDurableAdminAction } from './admin/admin-access.guard';
export { DURABLE_OPERATOR } from './admin/admin.constants';
export type { AdminRunSummary, AdminRunPage, AdminRunDetail } from './admin/admin-runs.service';
export type { RunTimeline, EpochSection, EpochStart, StepRow } from './admin/run-timeline';
export type { FieldError } from './admin/admin-validation.pipe';
export { DurableRetentionModule } from './maintenance/retention/durable-retention.module';
export type { DurableRetentionAsyncOptions } from './maintenance/retention/durable-retention.module';
export { DurableRetention, RETENTION_INTERVAL_NAME } from './maintenance/retention/durable-retention.service';
export * from './maintenance/retention/retention-options.interface';
