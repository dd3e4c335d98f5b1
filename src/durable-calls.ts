// The decorators of a workflow's calls: steps, commands and durable transactions (with what they need).
export { DurableStep } from './decorators/durable-step.decorator';
export { IdempotentCommand } from './decorators/idempotent-command.decorator';
export { DurableTransaction } from './decorators/durable-transaction.decorator';
export type {
  DurableTransactionOptions,
  DurableTransactionIsolation,
} from './interfaces/transaction.interface';
export { DurableTransactionHost } from './api/durable-transaction-host';
