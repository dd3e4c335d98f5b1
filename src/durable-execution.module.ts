import { Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { DURABLE_EXECUTION_OPTIONS } from './durable-execution.constants';
import { DurableExecutionConfigurableModule, RAW_OPTIONS_TOKEN } from './durable-execution.module-definition';
import { DurableExplorer } from './discovery/durable.explorer';
import { DurableRegistry } from './engine/durable.registry';
import { resolveOptions } from './options/resolve-options';
import { DurableObservers } from './engine/durable-observers';
import { DurableDatabase } from './store/durable-database';
import { DurableBootState } from './util/boot-state';
import { Executor } from './engine/executor.service';
import { ReplayChecker } from './engine/replay-check';
import { ReplayHistoryStore } from './store/replay-history.store';
import { Reconciler } from './maintenance/reconciler.service';
import { WorkerPresence } from './maintenance/worker-presence.service';
import { WorkerPresenceStore } from './store/worker-presence.store';
import { ReplicationStore } from './store/replication.store';
import { ReplicationCheck } from './maintenance/replication-check.service';
import { DurableWorker } from './engine/worker.service';
import { CheckpointService } from './api/checkpoint.service';
import { CommandGateway } from './api/command-gateway.service';
import { LeaseService } from './api/lease.service';
import { LeaseHolderStore } from './store/lease-holders.store';
import { DurableJobs } from './engine/durable-jobs';
import { RunRepository } from './api/run.repository';
import { RunResultWaiter } from './api/run-results';
import { RunStateStore } from './store/run-state/run-state.store';
import { CommandStore } from './store/command.store';
import { ExpiredLeaseStore } from './store/expired-leases.store';
import { LimitsStore } from './store/limits.store';
import { ScheduleStore } from './store/schedules.store';
import { ScheduleRunner } from './maintenance/schedule-runner.service';
import { DurableSchedules } from './api/durable-schedules.service';
import { WorkerLimits } from './engine/worker-limits';
import { RunControlStore } from './store/run-control.store';
import { RunEndListener } from './store/run-end-listener';
import { StreamStore } from './store/stream.store';
import { StreamListener } from './store/stream-listener';
import { RunStreamReader } from './api/run-stream';
import { RunReadStore } from './store/run-reads.store';
import { RunStatsReader } from './store/run-stats.reader';
import { DurableTransactionStore } from './store/transactions/transaction.store';
import { DurableTransactionHost } from './api/durable-transaction-host';

/**
 * Crash-safe durable execution on PostgreSQL. Import once with `forRoot` or `forRootAsync`. The module
 * is global by default (inject `RunRepository` anywhere); pass `isGlobal: false` to scope it.
 * @example
 * ```ts
 * DurableExecutionModule.forRoot({ database: { url: process.env.DATABASE_URL }, worker: { concurrency: 16 } })
 * ```
 */
@Module({
  // No ScheduleModule.forRoot(): the module's jobs join the app's SchedulerRegistry when the app imports
  // ScheduleModule.forRoot() (DurableJobs), so the app's own @Interval/@Cron are explored once.
  imports: [DiscoveryModule],
  providers: [
    { provide: DURABLE_EXECUTION_OPTIONS, useFactory: resolveOptions, inject: [RAW_OPTIONS_TOKEN] },
    DurableBootState,
    DurableDatabase,
    DurableRegistry,
    DurableExplorer,
    CheckpointService,
    CommandGateway,
    LeaseService,
    LeaseHolderStore,
    DurableJobs,
    RunStateStore,
    RunRepository,
    RunResultWaiter,
    Executor,
    ReplayChecker,
    ReplayHistoryStore,
    DurableWorker,
    Reconciler,
    DurableObservers,
    RunReadStore,
    RunControlStore,
    CommandStore,
    RunEndListener,
    StreamStore,
    StreamListener,
    RunStreamReader,
    ExpiredLeaseStore,
    LimitsStore,
    WorkerLimits,
    ScheduleStore,
    ScheduleRunner,
    DurableSchedules,
    RunStatsReader,
    WorkerPresenceStore,
    WorkerPresence,
    ReplicationStore,
    ReplicationCheck,
    DurableTransactionStore,
    DurableTransactionHost,
  ],
  exports: [
    DURABLE_EXECUTION_OPTIONS,
    RunRepository,
    CheckpointService,
    CommandGateway,
    LeaseService,
    DurableSchedules,
    DurableRegistry,
    DurableWorker,
    Reconciler,
    DurableObservers,
    DurableDatabase,
    RunStatsReader,
    RunReadStore,
    RunStreamReader,
    CommandStore,
    ReplayChecker,
    ReplicationStore,
    DurableTransactionHost,
  ],
})
export class DurableExecutionModule extends DurableExecutionConfigurableModule {}
