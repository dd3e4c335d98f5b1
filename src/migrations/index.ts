/**
 * `nestjs-durable-execution/migrations`: the module's migrations, for apps and scripts that apply them
 * themselves. By default the module applies them at boot (`database.migrationsRun`) and the CLI's
 * `migrate` applies them from a deploy step; this entry is for listing them in the app's own DataSource
 * (`DURABLE_EXECUTION_MIGRATIONS`, `durableExecutionMigrations({ schema })`) or running them from a
 * script (`runDurableMigrations`, `revertDurableMigrations`, `durableMigrationStatus`). See
 * docs/OPERATIONS.md ("Migrations") and docs/UPGRADING.md.
 * @packageDocumentation
 */
export {
  runDurableMigrations,
  revertDurableMigrations,
  durableMigrationStatus,
  DURABLE_MIGRATIONS_TABLE,
} from '../store/run-migrations';
export type { DurableMigrationStatus, MigrationSource } from '../store/run-migrations';
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
} from '../../migrations';
export type { DurableMigrationClass, DurableMigrationOptions } from '../../migrations';
// Thrown before anything is applied when the tables exist but `ai_migrations` has no record of them (the
// app's own migrations made them): keep applying them with the app's (also at boot, by the module).
export { SchemaConflictError } from '../errors/schema-conflict.error';
