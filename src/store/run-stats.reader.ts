import type { DurableDatabase } from './durable-database';
import { BACKLOG_SQL } from './sql/backlog.sql';
import { RUN_STATS_SQL } from './sql/run-stats.sql';

/** The operator's numbers: runs by status, in-doubt commands, the due backlog. */
export interface RunStats {
  byStatus: Record<string, number>;
  inDoubtCommands: number;
  /** Runs due now and not yet claimed. */
  queueDepth: number;
  /** How long the oldest due run has waited (database clock), 0 when none is due. */
  oldestDueAgeMs: number;
}

/** The due backlog alone (cheap: the claim index). */
export interface Backlog {
  queueDepth: number;
  oldestDueAgeMs: number;
}

/** Reads run statistics, one statement each. Never used on the hot path. @internal */
export class RunStatsReader {
  constructor(private readonly db: DurableDatabase) {}

  async read(): Promise<RunStats> {
    const { rows } = await this.db.query(RUN_STATS_SQL, [], 'dx_run_stats');
    const r = rows[0];
    const byStatus: Record<string, number> = {};
    for (const [status, n] of Object.entries(r.by_status ?? {})) byStatus[status] = Number(n);
    return {
      byStatus,
      inDoubtCommands: r.in_doubt,
      queueDepth: r.depth,
      oldestDueAgeMs: Math.max(0, Math.round(r.oldest_due_ms)),
    };
  }

  async backlog(): Promise<Backlog> {
    const { rows } = await this.db.query(BACKLOG_SQL, [], 'dx_backlog');
    return { queueDepth: rows[0].depth, oldestDueAgeMs: Math.max(0, Math.round(rows[0].oldest_due_ms)) };
  }
}
