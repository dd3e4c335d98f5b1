export { DurableExecutionModule } from './durable-execution.module';
export { DURABLE_EXECUTION_OPTIONS } from './durable-execution.constants';
export * from './options/durable-execution-options.interface';
export * from './interfaces/run.interface';
export * from './interfaces/step-options.interface';
export * from './errors';
export { DurableStep } from './decorators/durable-step.decorator';
export { DurableWorkflow } from './decorators/durable-workflow.decorator';
export { IdempotentCommand } from './decorators/idempotent-command.decorator';
export * from './interfaces/command.interface';
export { RunContext, currentRun } from './runtime/run-context';
export { RunRepository } from './services/run.repository';
export { CheckpointService } from './services/checkpoint.service';
export { CommandGateway } from './services/command-gateway.service';
export type { CommandView } from './services/command-gateway.service';
export { LeaseService } from './services/lease.service';
export type { ClaimedRun, Fence } from './services/lease.service';
export { DurableRegistry } from './discovery/durable.registry';
export { DurableWorker } from './runtime/worker.service';
export { Reconciler } from './runtime/reconciler.service';
export type { ReconcileResult } from './runtime/reconciler.service';
export {
  runDurableMigrations,
  revertDurableMigrations,
  DURABLE_MIGRATIONS_TABLE,
} from './persistence/run-migrations';
export {
  DURABLE_EXECUTION_MIGRATIONS,
  CreateDurableExecutionSchema1764400000000,
  CommandApprovalStates1764500000000,
  HotLeaseRenewal1764600000000,
} from '../migrations';
