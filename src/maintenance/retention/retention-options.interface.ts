/** Options of `DurableRetentionModule.forRoot()`. */
export interface DurableRetentionOptions {
  /**
   * Delete the checkpoints, events and signals of succeeded and cancelled runs that finished longer ago
   * than this (ms). The run row stays (status, input, output, error) with `state.retention` and one
   * `run.pruned` event. Failed and dead-lettered runs keep everything: `retry` replays from their checkpoints.
   */
  pruneAfterMs: number;
  /** Delete whole finished runs (any terminal status) that finished longer ago than this (ms). Default: never. */
  deleteRunsAfterMs?: number;
  /** Runs per statement. Default 500. */
  batchSize?: number;
  /** Batches per sweep at most (bounds one sweep's work). Default 1000. */
  maxBatchesPerSweep?: number;
  /** Sweep period. Default 1 hour. */
  intervalMs?: number;
  /**
   * Sweep on a cron expression instead (`CronExpression.EVERY_DAY_AT_3AM`, `'0 3 * * *'`): the job
   * `durable-execution:retention` in the app's SchedulerRegistry. Not with `intervalMs`.
   */
  cron?: string;
  /** Sweep on the interval in this process. Default true; off: call `DurableRetention.sweep()` yourself. */
  enabled?: boolean;
  /**
   * With ai_events partitioned by week (migration 1767000000000), each sweep first makes the partitions
   * of the coming weeks, then drops whole each week older than `pruneAfterMs` whose runs are all
   * prunable or pruned (pruning those with it); a week holding events of a run that is open, retryable,
   * recent or holds an unsettled command is kept, and its runs are pruned row by row as before.
   * Default true; false: row-by-row deletes only, and no partition is made (the DEFAULT partition takes
   * the rows of weeks with none).
   */
  eventPartitions?: boolean;
}

/** Options with defaults filled in. @internal */
export type ResolvedRetentionOptions = Required<Omit<DurableRetentionOptions, 'deleteRunsAfterMs' | 'cron'>> &
  Pick<DurableRetentionOptions, 'deleteRunsAfterMs' | 'cron'>;

/** What one sweep removed. */
export interface RetentionResult {
  /** Runs whose checkpoints, events and signals were deleted. */
  prunedRuns: number;
  checkpoints: number;
  events: number;
  signals: number;
  /** Whole runs deleted (`deleteRunsAfterMs`). */
  deletedRuns: number;
  /** Statements run (each one batch). */
  batches: number;
  /**
   * Partitions of ai_events (when it is partitioned and `eventPartitions` is on): weeks made ahead,
   * weeks dropped whole (their runs' counts are in the fields above), and weeks past the horizon kept
   * because a run there is not past retention (or a lock was not had in time).
   */
  partitions?: { made: string[]; dropped: string[]; kept: string[] };
}
