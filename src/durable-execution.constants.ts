/** Injection token of the resolved (validated, defaults merged) module options. */
export const DURABLE_EXECUTION_OPTIONS = Symbol('durable-execution:options');
/** Metadata key set by `@DurableWorkflow`. */
export const WORKFLOW_METADATA = 'durable-execution:workflow';
/** Metadata key of `@DurableCron` (a list of schedules on a workflow class). */
export const CRON_METADATA = 'durable-execution:cron';
/** Metadata key set by `@DurableStep`. */
export const STEP_METADATA = 'durable-execution:step';
/** Metadata key set by `@IdempotentCommand`. */
export const COMMAND_METADATA = 'durable-execution:command';
/** Metadata key set by `@DurableTransaction`. */
export const TRANSACTION_METADATA = 'durable-execution:transaction';
/** Name of the worker poll interval (formerly in `SchedulerRegistry`; the timer is now the worker's own). */
export const WORKER_INTERVAL_NAME = 'durable-execution:worker';
/** Name of the reconciler interval (formerly in `SchedulerRegistry`; the timer is now the reconciler's own). */
export const RECONCILER_INTERVAL_NAME = 'durable-execution:reconciler';
/** PostgreSQL NOTIFY channel that wakes idle workers. */
export const WAKE_CHANNEL = 'durable_execution_wake';
/** NOTIFY channel on which a run that someone awaits (`RunRepository.result`) is announced when it ends (payload: run id). */
export const DONE_CHANNEL = 'durable_execution_done';
/** NOTIFY channel on which a run's stream entries (`ctx.emit`) are announced (payload: the run id). */
export const STREAM_CHANNEL = 'durable_execution_stream';
/** Advisory lock key held while migrations run (two pods migrating at once both succeed). */
export const MIGRATION_LOCK_KEY = 7_402_113_901;
