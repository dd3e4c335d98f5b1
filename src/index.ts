/**
 * The public API of `nestjs-durable-execution`: every name a user of README.md, docs/ and examples/
 * writes against, and nothing else. Engine internals (the worker, the reconciler, the lease and
 * checkpoint stores, the registry, SQL, resolved options and injection tokens) live under src/ and are
 * imported from there by the library's own tests and benchmarks. The surface is checked:
 * `npm run api:check` compares it with etc/nestjs-durable-execution.api.md (see docs/API.md).
 * @packageDocumentation
 */

// The module and its options.
export { DurableExecutionModule } from './durable-execution.module';
// Type only: the base class whose static forRoot/forRootAsync DurableExecutionModule inherits, so that
// their signatures are part of the checked API. Not a runtime export.
export type { DurableExecutionConfigurableModule } from './durable-execution.module-definition';
export type {
  DatabaseOptions,
  DurableDataSource,
  DurableExecutionModuleOptions,
  LimitOptions,
  ReconcilerOptions,
  RetryPolicy,
  WorkerOptions,
} from './options/durable-execution-options.interface';
export { REDACT_SURFACES, REDACTION_FAILED } from './options/redact';
export type { RedactHook, RedactKey, RedactSurface } from './options/redact';

// Writing workflows: decorators, the run context, commands.
export { DurableWorkflow } from './decorators/durable-workflow.decorator';
export { DurableCron } from './decorators/durable-cron.decorator';
export type { ScheduledRunInput } from './decorators/durable-cron.decorator';
export * from './durable-calls';
export type {
  DurableStepOptions,
  DurableWorkflowOptions,
  DurableCronOptions,
  StepKind,
} from './interfaces/step-options.interface';
export { RunContext } from './engine/run-context';
export type { OnRunCancel, WorkflowSignals } from './engine/run-context';
export type {
  AnySignals,
  IsStoredUnchanged,
  Jsonify,
  SignalMap,
  SignalName,
  SignalPayload,
  StorableAs,
  Stored,
  UntypedSignalName,
} from './interfaces/stored-types.interface';
export type { ModelBudgetOptions, ResolvedModelBudget } from './interfaces/budget.interface';
export type {
  ChildOptions,
  ChildRun,
  ParentClosePolicy,
  StartChildOptions,
  WaitForChildOptions,
} from './interfaces/child.interface';
export { currentRun } from './engine/run-storage';
export type {
  ApprovalDecision,
  CommandContext,
  CommandFence,
  CommandLookup,
  CommandResolution,
  IdempotentCommandOptions,
  InDoubtPolicy,
  LookupContext,
  LookupResult,
  WaitForSignalOptions,
} from './interfaces/command.interface';

// Fencing tokens a target you own can check: the header (sent only where a command spreads fenceHeaders),
// signed with the module option `fence`, the verifier that authenticates it and refuses a superseded claim
// in the target's PostgreSQL (src/util/fence.ts), and a Nest guard.
export * from './util/fence';
export { DurableFenceGuard, DurableFenceKey, DurableFenceToken } from './nest/durable-fence.guard';

// Starting and reading runs.
export { RunRepository } from './api/run.repository';
export type { StreamEntry, StreamQuery, WatchOptions } from './interfaces/stream.interface';
export { runEventStream, type RunEventStreamOptions, type SseSocket } from './api/run-sse';
export { CommandGateway } from './api/command-gateway.service';
export { CheckpointService } from './api/checkpoint.service';
export type { CheckpointListQuery, StepOutput, StepRef } from './api/checkpoint.service';
export { LeaseService } from './api/lease.service';
export { DurableSchedules, type ScheduleView } from './api/durable-schedules.service';
export type { CreateScheduleOptions } from './api/durable-schedules.service';
export type { RunLeaseView, WorkerReleaseResult } from './interfaces/lease.interface';
export type { CommandView } from './interfaces/command.interface';
export { RUN_STATUSES, TERMINAL_STATUSES } from './interfaces/run.interface';
export type { LimitScope } from './interfaces/run-reads.interface';
export type {
  CheckpointView,
  KindVersionView,
  ListRunsQuery,
  PatchStatus,
  RetryHeldOptions,
  RunCursor,
  RunEvent,
  RunCancelInfo,
  RunHistoryQuery,
  RunPage,
  RunStatus,
  RunView,
  StartRunOptions,
  StartRunResult,
  WorkflowClass,
  WorkflowInput,
  WorkflowOutput,
} from './interfaces/run.interface';
export { DURABLE_EVENT_TYPES, isDurableEvent } from './interfaces/events.interface';
export { DURABLE_EVENT_PAYLOAD_KEYS } from './interfaces/event-payload-keys';
export type {
  DurableEventPayloads,
  DurableEventType,
  CommandRef,
  ModelUsagePayload,
  NotSent,
  By,
} from './interfaces/events.interface';

// Errors, each with a stable code, and their HTTP mapping.
  CallAbandonedError,
export {
  ChildRunError,
  CommandFailedError,
  CommandInStepError,
  CommandNotFoundError,
  DanglingCallError,
  DuplicateRegistrationError,
  DurableExecutionError,
  DurableUsageError,
  ForeignThreadError,
  IdempotencyConflictError,
  InvalidArgumentError,
  InvalidCommandStateError,
  InvalidOptionsError,
  InvalidRunStateError,
  LeaseLostError,
  MissingConcurrencyKeyError,
  MissingDependencyError,
  MountMismatchError,
  NoWorkerForKindError,
  NonDeterminismError,
  NonRetryableError,
  PayloadTooLargeError,
  ResultTimeoutError,
  RunCancelledError,
  RunFailedError,
  RunNotFoundError,
  ScheduleConflictError,
  ScheduleNotFoundError,
  SchemaConflictError,
  SchemaNotReadyError,
  SerializationError,
  SignalTimeoutError,
  StaleFenceError,
  StepTimeoutError,
  TooManyStreamClientsError,
  UnauthenticatedFenceError,
  UnknownRunKindError,
} from './errors';
export { ScheduleTooFrequentError, TooManyPendingSignalsError } from './errors'; // the limits on callers
export type { ChildRunEnd, DurableErrorCode, FenceRefusal } from './errors';
export * from './nest/durable-exception.filter'; // DurableExceptionFilter, DURABLE_HTTP_STATUS, DurableErrorBody

// Migrations: applied by the module, listed in the app's DataSource, or run from a script.
export {
  runDurableMigrations,
  revertDurableMigrations,
  durableMigrationStatus,
  DURABLE_MIGRATIONS_TABLE,
} from './store/run-migrations';
export type { DurableMigrationStatus, MigrationSource } from './store/run-migrations';
export {
  DURABLE_EXECUTION_MIGRATIONS,
  durableExecutionMigrations,
  CreateDurableExecutionSchema1764400000000,
  CommandApprovalStates1764500000000,
  HotLeaseRenewal1764600000000,
  ReplayOrder1764700000000,
  RunResultNotify1764800000000,
  AdminSessions1764900000000,
  WorkerPresence1765000000000,
} from '../migrations';
export type { DurableMigrationClass, DurableMigrationOptions } from '../migrations';

// Opt-in: admin API and run inspector.
export { DurableAdminModule } from './admin/durable-admin.module';
export type {
  DurableAdminLoginOptions,
  DurableAdminModuleAsyncOptions,
  DurableAdminModuleOptions,
  DurableAdminOpenApiOptions,
  DurableSecurityScheme,
} from './admin/admin-options.interface';
export { addDurableAdminSecurity } from './admin/admin-openapi';
export type { OpenApiDocumentLike } from './admin/admin-openapi';
export { DURABLE_ADMIN_CSRF_HEADER, DURABLE_ADMIN_SESSION_COOKIE } from './admin/login/admin-session';
export { ApiKeyAdminGuard } from './admin/api-key-admin.guard';
export type { ApiKeyAdminGuardOptions, ApiKeyHolder } from './admin/api-key-admin.guard';
export { isDurableAdminAction } from './admin/admin-access.guard';
export { DURABLE_OPERATOR } from './admin/admin.constants';
// Bodies of the admin REST API (GET api/runs, api/runs/:id and its events, checkpoints, changes, api/stats; 400 field errors).
export type {
  AdminRunSummary,
  AdminRunPage,
  AdminRunDetail,
  AdminRunHistoryPage,
  AdminRunChanges,
} from './admin/admin-runs.service';
export type { RunTimeline, EpochSection, EpochStart, StepRow } from './admin/run-timeline';
export type { FieldError } from './admin/admin-validation.pipe';
export type { RunStats } from './store/run-stats.reader';

// Opt-in: metrics, traces, health, observers.
export { DurableObservabilityModule } from './observability/durable-observability.module';
export type {
  DurableHealthOptions,
  DurableMetricsOptions,
  DurableObservabilityAsyncOptions,
  DurableObservabilityOptions,
  DurableObservabilityRoutes,
  DurableTracingOptions,
  MetricsRegistryLike,
} from './observability/observability-options.interface';
export { DurableObservers } from './engine/durable-observers';
export type {
  DurableObserver,
  ReconcileOutcome,
  RunAttemptInfo,
  RunAttemptOutcome,
  StepInfo,
  StepOutcome,
  WorkerTickInfo,
} from './interfaces/durable-observer.interface';
export { DATABASE_UNREACHABLE, DurableHealthIndicator } from './observability/durable-health.indicator';
export type { DurableHealthResult } from './observability/durable-health.indicator';
export type { ReplicationMode } from './util/replication-report';

// Opt-in: retention.
export { DurableRetentionModule } from './maintenance/retention/durable-retention.module';
export type { DurableRetentionAsyncOptions } from './maintenance/retention/durable-retention.module';
export { DurableRetention, RETENTION_INTERVAL_NAME } from './maintenance/retention/durable-retention.service';
export { DURABLE_JOB_NAMES } from './engine/durable-jobs';
export type { JobCadence } from './engine/durable-jobs';
export type {
  DurableRetentionOptions,
  RetentionResult,
} from './maintenance/retention/retention-options.interface';
