import type { MigrationInterface } from 'typeorm';
import { durableNames } from '../src/store/durable-names';
import { CreateDurableExecutionSchema1764400000000 } from './1764400000000-create-durable-execution-schema';
import { CommandApprovalStates1764500000000 } from './1764500000000-command-approval-states';
import { HotLeaseRenewal1764600000000 } from './1764600000000-hot-lease-renewal';
import { ReplayOrder1764700000000 } from './1764700000000-replay-order';
import { RunResultNotify1764800000000 } from './1764800000000-run-result-notify';
import { AdminSessions1764900000000 } from './1764900000000-admin-sessions';
import { WorkerPresence1765000000000 } from './1765000000000-worker-presence';
import { ConcurrencyLimits1765100000000 } from './1765100000000-concurrency-limits';
import { Schedules1765200000000 } from './1765200000000-schedules';
import { RateLimits1765300000000 } from './1765300000000-rate-limits';
import { Debounce1765400000000 } from './1765400000000-debounce';
import { ChildRuns1765500000000 } from './1765500000000-child-runs';
import { ModelBudgets1765600000000 } from './1765600000000-model-budgets';
import { ScheduleQueue1765700000000 } from './1765700000000-schedule-queue';
import { PatchMarkers1765800000000 } from './1765800000000-patch-markers';
import { RunTags1765900000000 } from './1765900000000-run-tags';
import { SlotHolds1766000000000 } from './1766000000000-slot-holds';
import { RunStream1766100000000 } from './1766100000000-run-stream';
import { RunGenerations1766200000000 } from './1766200000000-run-generations';
import { KindVersions1766300000000 } from './1766300000000-kind-versions';
import { FencingTimelines1766400000000 } from './1766400000000-fencing-timelines';
import { ScheduleTimelines1766500000000 } from './1766500000000-schedule-timelines';
import { SleepDuePositions1766600000000 } from './1766600000000-sleep-due-positions';
import { RunTagIndex1766700000000 } from './1766700000000-run-tag-index';
import { ScheduleAttempts1766800000000 } from './1766800000000-schedule-attempts';
import { ChildEndHint1766900000000 } from './1766900000000-child-end-hint';
import { LangGraphCheckpoints1766950000000 } from './1766950000000-langgraph-checkpoints';
import { LangGraphThreadOwners1766990000000 } from './1766990000000-langgraph-thread-owners';
import { RecordFormat1766995000000 } from './1766995000000-record-format';
import { RunForks1766997000000 } from './1766997000000-run-forks';
import { WorkerHandoff1766998000000 } from './1766998000000-worker-handoff';
import { CheckpointEvents1766999500000 } from './1766999500000-checkpoint-events';
import { PartitionedEvents1767000000000 } from './1767000000000-partitioned-events';

export {
  CreateDurableExecutionSchema1764400000000,
  CommandApprovalStates1764500000000,
  HotLeaseRenewal1764600000000,
  ReplayOrder1764700000000,
  RunResultNotify1764800000000,
  AdminSessions1764900000000,
  WorkerPresence1765000000000,
  ConcurrencyLimits1765100000000,
  Schedules1765200000000,
  RateLimits1765300000000,
  Debounce1765400000000,
  ChildRuns1765500000000,
  ModelBudgets1765600000000,
  ScheduleQueue1765700000000,
  PatchMarkers1765800000000,
  RunTags1765900000000,
  SlotHolds1766000000000,
  RunStream1766100000000,
  RunGenerations1766200000000,
  KindVersions1766300000000,
  FencingTimelines1766400000000,
  ScheduleTimelines1766500000000,
  SleepDuePositions1766600000000,
  RunTagIndex1766700000000,
  ScheduleAttempts1766800000000,
  ChildEndHint1766900000000,
  LangGraphCheckpoints1766950000000,
  LangGraphThreadOwners1766990000000,
  RecordFormat1766995000000,
  RunForks1766997000000,
  WorkerHandoff1766998000000,
  CheckpointEvents1766999500000,
  PartitionedEvents1767000000000,
};

/**
 * The module's migrations in order. List them in your own DataSource's `migrations` if you run
 * migrations yourself (then set `database.migrationsRun: false`). They create the tables unqualified
 * (the connection's `search_path`, normally `public`); for another schema use
 * `durableExecutionMigrations({ schema })`.
 */
export const DURABLE_EXECUTION_MIGRATIONS = [
  CreateDurableExecutionSchema1764400000000,
  CommandApprovalStates1764500000000,
  HotLeaseRenewal1764600000000,
  ReplayOrder1764700000000,
  RunResultNotify1764800000000,
  AdminSessions1764900000000,
  WorkerPresence1765000000000,
  ConcurrencyLimits1765100000000,
  Schedules1765200000000,
  RateLimits1765300000000,
  Debounce1765400000000,
  ChildRuns1765500000000,
  ModelBudgets1765600000000,
  ScheduleQueue1765700000000,
  PatchMarkers1765800000000,
  RunTags1765900000000,
  SlotHolds1766000000000,
  RunStream1766100000000,
  RunGenerations1766200000000,
  KindVersions1766300000000,
  FencingTimelines1766400000000,
  ScheduleTimelines1766500000000,
  SleepDuePositions1766600000000,
  RunTagIndex1766700000000,
  ScheduleAttempts1766800000000,
  ChildEndHint1766900000000,
  LangGraphCheckpoints1766950000000,
  LangGraphThreadOwners1766990000000,
  RecordFormat1766995000000,
  RunForks1766997000000,
  WorkerHandoff1766998000000,
  CheckpointEvents1766999500000,
  PartitionedEvents1767000000000,
];

/** One of the module's migration classes, as TypeORM instantiates it (no constructor arguments). */
export type DurableMigrationClass = new () => MigrationInterface & { name: string; schema?: string };

/** Options of `durableExecutionMigrations` and of the functions that apply, list and revert them. */
export interface DurableMigrationOptions {
  /**
   * The PostgreSQL schema of the module's tables, as `database.schema` in the module's options: a plain
   * lowercase identifier, created by the first migration when missing. Default `'public'` (unqualified).
   */
  schema?: string;
}

/**
 * The module's migrations for `schema` (the module's `database.schema`), to list in your own
 * DataSource's `migrations` when your migrations create the module's tables. Without a schema, or with
 * `'public'`, it is `DURABLE_EXECUTION_MIGRATIONS` itself. For another schema each class creates and
 * alters the tables there (the first one creates the schema when missing), and its name is prefixed
 * with the schema (`durable.CreateDurableExecutionSchema1764400000000`): your migrations table can
 * record the migrations of two schemas side by side. Throws `InvalidArgumentError` (field `schema`)
 * for a name that is not a plain identifier.
 * @example
 * ```ts
 * new DataSource({ type: 'postgres', url, migrations: [...durableExecutionMigrations({ schema: 'durable' })] })
 * ```
 */
export function durableExecutionMigrations(options: DurableMigrationOptions = {}): DurableMigrationClass[] {
  const schema = durableNames(options.schema).schema;
  if (schema === undefined) return [...DURABLE_EXECUTION_MIGRATIONS];
  return DURABLE_EXECUTION_MIGRATIONS.map((base: DurableMigrationClass) => {
    const bound = class extends base {
      constructor() {
        super();
        this.schema = schema;
        this.name = `${schema}.${this.name}`;
      }
    };
    Object.defineProperty(bound, 'name', { value: new bound().name });
    return bound;
  });
}
