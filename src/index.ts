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
export type { ModelBudgetOptions } from './interfaces/budget.interface';
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

// Fencing tokens: the module option `fence` signs the token a command gets (`ctx.fence`). What sends,
// parses, signs and checks it is the `nestjs-durable-execution/fence` subpath (src/fence).
export type { FenceKeyOptions } from './options/fence-key';

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
export type { ForkRunOptions, ForkRunResult } from './interfaces/run-fork.interface'; // time travel
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
export {
  CallAbandonedError,
  ChildRunError,
  CommandFailedError,
  CommandInStepError,
  CommandNotFoundError,
  DuplicateRegistrationError,
  DurableExecutionError,
  DurableUsageError,
  IdempotencyConflictError,
  InvalidArgumentError,
  InvalidCommandStateError,
  InvalidOptionsError,
  InvalidRunStateError,
  LeaseLostError,
  MissingConcurrencyKeyError,
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
  SchemaNotReadyError,
  SerializationError,
  SignalTimeoutError,
  StepTimeoutError,
  TooManyStreamClientsError,
  UnknownRunKindError,
} from './errors';
export { ScheduleTooFrequentError, TooManyPendingSignalsError } from './errors'; // the limits on callers
export type { ChildRunEnd, DurableErrorCode } from './errors';
export { ForkRefusedError } from './errors'; // time travel (RunRepository.fork)
export * from './nest/durable-exception.filter'; // DurableExceptionFilter, DURABLE_HTTP_STATUS, DurableErrorBody

// Opt-in, each behind a subpath of its own: the admin API and run inspector (`/admin`, src/admin), metrics,
// traces, health and observers (`/observability`, src/observability), retention (`/retention`,
// src/maintenance/retention), fencing tokens (`/fence`, src/fence) and the migrations (`/migrations`,
// src/migrations). The module's own jobs in the app's SchedulerRegistry:
export { DURABLE_JOB_NAMES } from './engine/durable-jobs';
