import { Inject, Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import { DurableDatabase } from '../persistence/durable-database';
import { RETENTION_DELETE_RUNS_SQL } from '../persistence/sql/retention-delete-runs.sql';
import { RETENTION_PRUNE_SQL } from '../persistence/sql/retention-prune.sql';
import type { ResolvedRetentionOptions, RetentionResult } from './retention-options.interface';

/** Injection token of the resolved retention options. */
export const DURABLE_RETENTION_OPTIONS = Symbol('durable-execution:retention-options');
/** Name of the retention interval in `SchedulerRegistry`. */
export const RETENTION_INTERVAL_NAME = 'durable-execution:retention';

interface PruneRow {
  runs: number;
  checkpoints: number;
  events: number;
  signals: number;
  last_key: string | null;
}

/** Statuses whose history can go: nothing can replay a succeeded or cancelled run again. */
const PRUNABLE = ['succeeded', 'cancelled'];

/**
 * Deletes the history of old finished runs in batches, on an interval registered in SchedulerRegistry
 * (like the reconciler), safe on every pod at once (SKIP LOCKED). Never touches a live run, a run that
 * can still be retried, or a run with a command an operator must settle.
 */
@Injectable()
export class DurableRetention implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('DurableExecution');
  private running = false;

  constructor(
    private readonly db: DurableDatabase,
    private readonly scheduler: SchedulerRegistry,
    @Inject(DURABLE_RETENTION_OPTIONS) private readonly options: ResolvedRetentionOptions,
  ) {}

  onApplicationBootstrap(): void {
    if (!this.options.enabled) return;
    const timer = setInterval(() => void this.safeSweep(), this.options.intervalMs);
    timer.unref(); // retention never keeps a process alive on its own
    this.scheduler.addInterval(RETENTION_INTERVAL_NAME, timer);
  }

  onApplicationShutdown(): void {
    if (this.scheduler.doesExist('interval', RETENTION_INTERVAL_NAME)) {
      this.scheduler.deleteInterval(RETENTION_INTERVAL_NAME);
    }
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
    let after: Array<string | null> = [null, null];
    while (out.batches < o.maxBatchesPerSweep) {
      const { rows } = await this.db.query<PruneRow>(RETENTION_PRUNE_SQL, [
        PRUNABLE,
        o.pruneAfterMs,
        ...after,
        o.batchSize,
      ]);
      const r = rows[0];
      out.batches++;
      out.prunedRuns += r.runs;
      out.checkpoints += r.checkpoints;
      out.events += r.events;
      out.signals += r.signals;
      if (r.runs < o.batchSize) break;
      after = r.last_key!.split('|');
    }
    if (o.deleteRunsAfterMs === undefined) return out;
    while (out.batches < o.maxBatchesPerSweep) {
      const { rows } = await this.db.query(RETENTION_DELETE_RUNS_SQL, [o.deleteRunsAfterMs, o.batchSize]);
      out.batches++;
      out.deletedRuns += rows[0].runs;
      if (rows[0].runs < o.batchSize) break;
    }
    return out;
  }

  private async safeSweep(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      const r = await this.sweep();
      if (r.prunedRuns || r.deletedRuns) {
        this.logger.log(
          `retention: pruned ${r.prunedRuns} run(s) (${r.events} events, ${r.checkpoints} checkpoints), deleted ${r.deletedRuns} run(s)`,
        );
      }
    } catch (err) {
      this.logger.warn(`retention sweep failed (will retry): ${(err as Error).message}`);
    } finally {
      this.running = false;
    }
  }
}
