import {
  Inject,
  Injectable,
  Logger,
  BeforeApplicationShutdown,
  OnApplicationBootstrap,
} from '@nestjs/common';
import { RetentionStore } from '../../store/retention.store';
import { EventPartitionsStore } from '../../store/event-partitions.store';
import type { RunCursorKey } from '../../util/run-cursor';
import { IntervalTask } from '../interval-task';
import { DURABLE_JOB_NAMES, DurableJobs } from '../../engine/durable-jobs';
import type { ResolvedRetentionOptions, RetentionResult } from './retention-options.interface';
import { replayOnly } from '../../engine/replay-check-report';

/** Injection token of the resolved retention options. */
export const DURABLE_RETENTION_OPTIONS = Symbol('durable-execution:retention-options');
/**
 * The name of the retention sweep in the app's `SchedulerRegistry` (`DURABLE_JOB_NAMES.retention`).
 * @deprecated Use `DURABLE_JOB_NAMES.retention`.
 */
export const RETENTION_INTERVAL_NAME = DURABLE_JOB_NAMES.retention;

/** Statuses whose history can go: nothing can replay a succeeded or cancelled run again. */
const PRUNABLE = ['succeeded', 'cancelled'];
/** Weekly partitions of ai_events kept made ahead of the current week. */
const WEEKS_AHEAD = 4;

/**
 * Deletes the history of old finished runs in batches, as a job (`durable-execution:retention` in the
 * app's SchedulerRegistry, or a timer of its own, like the reconciler's), safe on every pod at once (SKIP LOCKED). Never touches a live run, a run that
 * can still be retried, or a run with a command an operator must settle.
 */
@Injectable()
export class DurableRetention implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('DurableExecution');
  private readonly sweeps = new IntervalTask('retention sweep', () => this.sweepAndLog());

  /** @internal Created by Nest dependency injection: not part of the API. */
  constructor(
    private readonly store: RetentionStore,
    @Inject(DURABLE_RETENTION_OPTIONS) private readonly options: ResolvedRetentionOptions,
    private readonly jobs: DurableJobs,
    private readonly partitions: EventPartitionsStore,
  ) {}

  onApplicationBootstrap(): void {
    if (!this.options.enabled || replayOnly()) return;
    // Not kept alive: retention never keeps a process alive on its own.
    const o = this.options;
    const cadence = o.cron ? { cron: o.cron } : { everyMs: o.intervalMs };
    this.sweeps.start(this.jobs, DURABLE_JOB_NAMES.retention, cadence, { keepAlive: false });
  }

  /** Stops the job and waits for a sweep in flight before the phase that ends the pool. */
  beforeApplicationShutdown(): Promise<void> {
    return this.sweeps.stop();
  }

  /** Whether the sweep interval is armed (between bootstrap and shutdown, when enabled). */
  get scheduled(): boolean {
    return this.sweeps.started;
  }

  /** One sweep: prune batch after batch, then delete whole runs past the second horizon. */
  async sweep(): Promise<RetentionResult> {
    const o = this.options;
    const out: RetentionResult = {
      prunedRuns: 0,
      checkpoints: 0,
      events: 0,
      signals: 0,
      deletedRuns: 0,
      batches: 0,
    };
    if (o.eventPartitions) out.partitions = await this.sweepPartitions(out);
    let after: RunCursorKey | null = null;
    while (out.batches < o.maxBatchesPerSweep) {
      const r = await this.store.prune(PRUNABLE, o.pruneAfterMs, after, o.batchSize);
      out.batches++;
      out.prunedRuns += r.runs;
      out.checkpoints += r.checkpoints;
      out.events += r.events;
      out.signals += r.signals;
      if (r.runs < o.batchSize) break;
      after = r.lastKey;
    }
    if (o.deleteRunsAfterMs === undefined) return out;
    while (out.batches < o.maxBatchesPerSweep) {
      const deleted = await this.store.deleteRuns(o.deleteRunsAfterMs, o.batchSize);
      out.batches++;
      out.deletedRuns += deleted;
      if (deleted < o.batchSize) break;
    }
    return out;
  }

  /**
   * Partitions first: make the coming weeks, then drop whole each week past the horizon whose runs may
   * all go (pruning them with it), before the row-by-row prune, which then finds them pruned.
   */
  private async sweepPartitions(out: RetentionResult): Promise<RetentionResult['partitions']> {
    const parts = await this.partitions.list();
    if (!parts.length) return undefined;
    const result = {
      made: await this.partitions.ensureAhead(WEEKS_AHEAD),
      dropped: [] as string[],
      kept: [] as string[],
    };
    const horizon = Date.now() - this.options.pruneAfterMs;
    for (const p of parts) {
      if (p.isDefault || p.to === null || p.to.getTime() > horizon) continue;
      const d = await this.partitions.dropIfPast(p, PRUNABLE, this.options.pruneAfterMs);
      (d.dropped ? result.dropped : result.kept).push(p.name);
      out.prunedRuns += d.runs;
      out.events += d.events;
      out.checkpoints += d.checkpoints;
      if (d.busy) this.logger.warn(`retention: partition ${p.name} left for the next sweep: ${d.busy}`);
    }
    return result;
  }

  private async sweepAndLog(): Promise<void> {
    const r = await this.sweep();
    if (r.partitions?.dropped.length) {
      this.logger.log(`retention: dropped event partition(s) ${r.partitions.dropped.join(', ')}`);
    }
    if (r.prunedRuns || r.deletedRuns) {
      this.logger.log(
        `retention: pruned ${r.prunedRuns} run(s) (${r.events} events, ${r.checkpoints} checkpoints), deleted ${r.deletedRuns} run(s)`,
      );
    }
  }
}
