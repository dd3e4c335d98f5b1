/**
 * `nestjs-durable-execution/retention`: the opt-in retention sweep (`DurableRetentionModule`), which
 * prunes the history of finished runs (checkpoints, events, signals) and deletes whole finished runs
 * after the windows you set, in batches. See docs/OPERATIONS.md ("Retention").
 * @packageDocumentation
 */
export { DurableRetentionModule } from './durable-retention.module';
export type { DurableRetentionAsyncOptions } from './durable-retention.module';
export { DurableRetention, RETENTION_INTERVAL_NAME } from './durable-retention.service';
export type { DurableRetentionOptions, RetentionResult } from './retention-options.interface';
