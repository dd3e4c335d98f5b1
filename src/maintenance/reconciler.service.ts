import {
  Inject,
  Injectable,
  Logger,
  BeforeApplicationShutdown,
  OnApplicationBootstrap,
} from '@nestjs/common';
import { DURABLE_EXECUTION_OPTIONS } from '../durable-execution.constants';
import type { ResolvedDurableOptions } from '../options/durable-execution-options.interface';
import { DurableObservers } from '../engine/durable-observers';
import { ExpiredLeaseStore } from '../store/expired-leases.store';
import { LimitsStore } from '../store/limits.store';
import { IntervalTask } from './interval-task';
import { DURABLE_JOB_NAMES, DurableJobs, jobName } from '../engine/durable-jobs';
import { replayOnly } from '../engine/replay-check-report';

/** Outcome of one sweep. */
export interface ReconcileResult {
  requeued: number;
  deadLettered: number;
  /** Runs held back by a full concurrency limit put back in the queue (a slot of theirs was free). */
  woken?: number;
  /** Child runs of parents that ended, cancelled (`parentClose: 'cancel'`) where the parent's end could not. */
  orphansCancelled?: number;
}

/**
 * Recovers runs whose worker died: expired leases go back to `waiting` with backoff, or are
 * dead-lettered when attempts are spent; runs held back by a concurrency limit whose scope has a free
 * slot go back to the queue (the safety net behind the statements that free slots); children a
 * parent's end left going (a row another statement held) are cancelled by their policy. A job on `reconciler.intervalMs` or `reconciler.cron`
 * (`durable-execution:reconciler` in the app's SchedulerRegistry); safe on every pod.
 */
@Injectable()
export class Reconciler implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('DurableExecution');
  /** The sweep: a job in the app's SchedulerRegistry (`durable-execution:reconciler`), or a timer of its own. */
  private readonly sweeps = new IntervalTask('reconciler sweep', () => this.sweepAndLog());

  constructor(
    private readonly leases: ExpiredLeaseStore,
    private readonly limits: LimitsStore,
    @Inject(DURABLE_EXECUTION_OPTIONS) private readonly options: ResolvedDurableOptions,
    private readonly observers: DurableObservers,
    private readonly jobs: DurableJobs,
  ) {}

  onApplicationBootstrap(): void {
    if (!this.options.reconciler.enabled || replayOnly()) return;
    // Kept alive: a reconciler-only process lives on this timer; beforeApplicationShutdown clears it.
    const r = this.options.reconciler;
    const name = jobName(DURABLE_JOB_NAMES.reconciler, this.options.database.schema);
    this.sweeps.start(this.jobs, name, r.cron ? { cron: r.cron } : { everyMs: r.intervalMs }, {
      keepAlive: true,
    });
  }

  /**
   * Stops the job and waits for its tick in flight before the shutdown phase that ends the pool
   * (Nest runs one phase's hooks together; `onApplicationShutdown` is the pool's).
   */
  beforeApplicationShutdown(): Promise<void> {
    return this.sweeps.stop();
  }

  /** One full sweep, batch after batch until no expired lease is left. */
  async sweep(): Promise<ReconcileResult> {
    const r = this.options.reconciler;
    const out: ReconcileResult = { requeued: 0, deadLettered: 0 };
    for (;;) {
      const rows = await this.leases.reclaim(r.batchSize, r.backoffBaseMs, r.backoffMaxMs);
      for (const row of rows) {
        if (row.status === 'dead_lettered') out.deadLettered++;
        else out.requeued++;
      }
      if (rows.length < r.batchSize) {
        if (this.observers.active && (out.requeued || out.deadLettered)) this.observers.reconciled(out);
        const { woken } = await this.limits.wakeHeld();
        const orphans = await this.leases.cancelOrphans(r.batchSize);
        return { ...out, ...(woken ? { woken } : {}), ...(orphans ? { orphansCancelled: orphans } : {}) };
      }
    }
  }

  private async sweepAndLog(): Promise<void> {
    const res = await this.sweep();
    if (res.woken) this.logger.debug(`reconciler: ${res.woken} run(s) held back by a limit woken`);
    if (res.orphansCancelled)
      this.logger.log(`reconciler: ${res.orphansCancelled} child run(s) of ended parents cancelled`);
    if (res.requeued || res.deadLettered) {
      this.logger.log(
        `reconciler: ${res.requeued} expired lease(s) requeued, ${res.deadLettered} dead-lettered`,
      );
    }
  }
}
