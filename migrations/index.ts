import { CreateDurableExecutionSchema1764400000000 } from './1764400000000-create-durable-execution-schema';
import { CommandApprovalStates1764500000000 } from './1764500000000-command-approval-states';
import { HotLeaseRenewal1764600000000 } from './1764600000000-hot-lease-renewal';
import { ReplayOrder1764700000000 } from './1764700000000-replay-order';
import { RunResultNotify1764800000000 } from './1764800000000-run-result-notify';

export {
  CreateDurableExecutionSchema1764400000000,
  CommandApprovalStates1764500000000,
  HotLeaseRenewal1764600000000,
  ReplayOrder1764700000000,
  RunResultNotify1764800000000,
};

/**
 * The module's migrations in order. List them in your own DataSource's `migrations` if you run
 * migrations yourself (then set `database.migrationsRun: false`).
 */
export const DURABLE_EXECUTION_MIGRATIONS = [
  CreateDurableExecutionSchema1764400000000,
  CommandApprovalStates1764500000000,
  HotLeaseRenewal1764600000000,
  ReplayOrder1764700000000,
  RunResultNotify1764800000000,
];
