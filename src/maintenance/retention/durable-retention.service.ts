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
/** PostgreSQL's insufficient_privilege: CREATE on the schema, or ownership, is missing. */
const NO_PRIVILEGE = '42501';

const codeOf = (err: unknown): string | undefined => (err as { code?: string })?.code;
const messageOf = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/**
 * Deletes the history of old finished runs in batches, as a job (`durable-execution:retention` in the
 * app's SchedulerRegistry, or a timer of its own, like the reconciler's), safe on every pod at once (SKIP LOCKED). Never touches a live run, a run that
 * can still be retried, or a run with a command an operator must settle.
 */
@Injectable()
export class DurableRetention implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('DurableExecution');
  private readonly sweeps = new IntervalTask('retention sweep', () => this.sweepAndLog());
  /** Partition upkeep refused for want of a privilege, logged once each until it works again. */
  private readonly refused = { make: false, drop: false };

  /** @internal Created by Nest dependency injection: not part of the API. */
  constructor(
    private readonly store: RetentionStore,
    @Inject(DURABLE_RETENTION_OPTIONS) private readonly options: ResolvedRetentionOptions,
    private readonly jobs: DurableJobs,
    private readonly partitions: EventPartitionsStore,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    if (replayOnly()) return;
    await this.checkPrivileges();
    if (!this.options.enabled) return;
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
   * all go (pruning them with it), before the row-by-row prune, which then finds them pruned. Upkeep
   * never stops the prune: a week the role may not make or drop (42501: CREATE on the schema, ownership)
   * is logged once, with the privilege it needs; any other failure is logged at each sweep.
   */
  private async sweepPartitions(out: RetentionResult): Promise<RetentionResult['partitions']> {
    const parts = await this.partitions.list();
    if (!parts.length) return undefined;
    const result = { made: [] as string[], dropped: [] as string[], kept: [] as string[] };
    try {
      result.made = await this.partitions.ensureAhead(WEEKS_AHEAD);
      this.refused.make = false;
    } catch (err) {
      this.upkeepFailed('make', err);
    }
    const horizon = Date.now() - this.options.pruneAfterMs;
    let dropping = true;
    for (const p of parts) {
      if (p.isDefault || p.to === null || p.to.getTime() > horizon) continue;
      const d = dropping
        ? await this.partitions
            .dropIfPast(p, PRUNABLE, this.options.pruneAfterMs)
            .catch((err: unknown) => void this.upkeepFailed('drop', err, p.name))
        : undefined;
      // Refused: the next weeks would be too (one owner made them all); their runs go row by row.
      if (!d) dropping = false;
      (d?.dropped ? result.dropped : result.kept).push(p.name);
      if (!d) continue;
      if (d.dropped) this.refused.drop = false;
      out.prunedRuns += d.runs;
      out.events += d.events;
      out.checkpoints += d.checkpoints;
      if (d.busy) this.logger.warn(`retention: partition ${p.name} left for the next sweep: ${d.busy}`);
    }
    return result;
  }

  /** A partition not made or not dropped: logged (once while a privilege is missing), the sweep goes on. */
  private upkeepFailed(what: 'make' | 'drop', err: unknown, partition?: string): void {
    const events = this.store.names.label('ai_events');
    const fallback = this.store.names.label('ai_events_default');
    if (codeOf(err) !== NO_PRIVILEGE) {
      this.logger.warn(
        `retention: ${what === 'make' ? 'making event partitions' : `dropping event partition ${partition}`} ` +
          `failed (${messageOf(err)}); pruning goes on row by row, tried again at the next sweep`,
      );
      return;
    }
    if (this.refused[what]) return;
    this.refused[what] = true;
    this.logger.warn(
      what === 'make'
        ? `retention: cannot make event partitions (${messageOf(err)}): making a week needs CREATE on schema ` +
            `${this.store.names.schema ?? 'public'} and ownership of ${events} ` +
            `(the role that ran the migrations has both). Pruning goes on row by row; new events collect in ` +
            `${fallback} and move into their week's partition once a sweep can make it. For a role that may ` +
            'only read and write rows, set eventPartitions: false in DurableRetentionModule.forRoot (and make ' +
            'partitions, if you want them, from a job that runs as the owner). Logged once.'
        : `retention: cannot drop event partition ${partition} (${messageOf(err)}): dropping a past week needs ` +
            `ownership of the partition (the role that made it). Its runs are pruned row by row instead; the ` +
            'partition stays, empty of them. Set eventPartitions: false for a role that may only read and write ' +
            'rows. Logged once.',
    );
  }

  /**
   * At boot: what the role lacks for the prune, `deleteRunsAfterMs` and event partitions (catalog reads
   * only), one warning per part that lacks something. Never fails the boot.
   */
  private async checkPrivileges(): Promise<void> {
    const o = this.options;
    let missing;
    try {
      missing = await this.store.missingPrivileges();
    } catch (err) {
      this.logger.warn(`retention: could not read the role's privileges (${messageOf(err)})`);
      return;
    }
    if (missing.prune.length)
      this.logger.warn(
        `retention: this role cannot prune: it lacks ${missing.prune.join(', ')}. Grant them, or sweeps fail.`,
      );
    if (o.deleteRunsAfterMs !== undefined && missing.deleteRuns.length)
      this.logger.warn(
        `retention: this role cannot delete old runs (deleteRunsAfterMs): it lacks ${missing.deleteRuns.join(', ')}.`,
      );
    if (o.eventPartitions && missing.partitions.length)
      this.logger.warn(
        `retention: this role may not keep the event partitions: it lacks ${missing.partitions.join(', ')}. ` +
          `Sweeps will prune row by row and new weeks' events collect in ${this.store.names.label('ai_events_default')}. ` +
          'For a role that may only read and write rows, set eventPartitions: false in ' +
          'DurableRetentionModule.forRoot, or run retention as the role that owns the tables.',
      );
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
