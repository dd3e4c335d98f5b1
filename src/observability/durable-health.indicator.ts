import { Inject, Injectable, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import { DURABLE_EXECUTION_OPTIONS } from '../durable-execution.constants';
import type { ResolvedDurableOptions } from '../options/durable-execution-options.interface';
import { DurableObservers } from '../engine/durable-observers';
import { DURABLE_OBSERVABILITY_OPTIONS } from './observability.constants';
import type { DurableObservabilityOptions } from './observability-options.interface';
import { RunStatsReader } from '../store/run-stats.reader';
import { ReplicationStore } from '../store/replication.store';
import { replicationReport } from '../util/replication-report';

/** One indicator's result, in the shape `@nestjs/terminus` expects (`HealthIndicatorResult`). */
export type DurableHealthResult = Record<string, { status: 'up' | 'down'; [detail: string]: unknown }>;

/** What a failing database or backlog check says unless `health.detailed` is set. */
export const DATABASE_UNREACHABLE = 'database unreachable';

/**
 * Health indicators for `@nestjs/terminus` (or any probe): the database answers, this process's worker
 * loop is claiming, the due backlog is younger than a bound, and what a failover of the database would
 * mean (`replication`). Each returns `up` or `down`, never throws.
 * Without `health.detailed` they carry no database error text and no worker id (the health route is not
 * behind the admin guard): a failure reads `database unreachable`.
 * @example
 * ```ts
 * this.health.check([() => this.durable.database(), () => this.durable.worker(), () => this.durable.backlog(), () => this.durable.replication()])
 * ```
 */
@Injectable()
export class DurableHealthIndicator implements OnModuleInit, OnModuleDestroy {
  private lastTickAt = Date.now();
  private lastTickError: string | null = null;
  private remove?: () => void;

  /** @internal Created by Nest dependency injection: not part of the API. */
  constructor(
    private readonly stats: RunStatsReader,
    private readonly replicationStore: ReplicationStore,
    private readonly observers: DurableObservers,
    @Inject(DURABLE_EXECUTION_OPTIONS) private readonly engine: ResolvedDurableOptions,
    @Inject(DURABLE_OBSERVABILITY_OPTIONS) private readonly options: DurableObservabilityOptions,
  ) {}

  onModuleInit(): void {
    this.remove = this.observers.add({
      workerTicked: (t) => {
        this.lastTickAt = Date.now();
        this.lastTickError = t.error ? String((t.error as Error).message ?? t.error) : null;
      },
    });
  }

  onModuleDestroy(): void {
    this.remove?.();
  }

  private get opts() {
    return this.options.health || {};
  }

  /** `select 1` within `databaseTimeoutMs`. */
  async database(key = 'database'): Promise<DurableHealthResult> {
    const timeoutMs = this.opts.databaseTimeoutMs ?? 2000;
    const started = Date.now();
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        this.stats.ping(),
        new Promise((_, reject) => {
          timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
        }),
      ]);
      return { [key]: { status: 'up', responseTimeMs: Date.now() - started } };
    } catch (err) {
      return { [key]: { status: 'down', message: this.failure(err) } };
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * The worker loop has run a claim round within `workerStaleAfterMs`. A process that runs no worker
   * (`worker.enabled: false`) is up with `enabled: false`; a draining worker stops claiming and goes down.
   */
  async worker(key = 'worker'): Promise<DurableHealthResult> {
    const w = this.engine.worker;
    if (!w.enabled) return { [key]: { status: 'up', enabled: false } };
    const staleAfterMs = this.opts.workerStaleAfterMs ?? Math.max(10_000, 24 * w.pollIntervalMs);
    const sinceMs = Date.now() - this.lastTickAt;
    const detail = this.opts.detailed
      ? { workerId: w.workerId, lastClaimRoundMs: sinceMs, staleAfterMs, lastError: this.lastTickError }
      : { lastClaimRoundMs: sinceMs, staleAfterMs, failing: this.lastTickError !== null };
    return { [key]: { status: sinceMs <= staleAfterMs ? 'up' : 'down', ...detail } };
  }

  /** The oldest due run has waited at most `maxBacklogAgeMs` (database clock). */
  async backlog(key = 'backlog'): Promise<DurableHealthResult> {
    const maxAgeMs = this.opts.maxBacklogAgeMs ?? 300_000;
    try {
      const b = await this.stats.backlog();
      return { [key]: { status: b.oldestDueAgeMs <= maxAgeMs ? 'up' : 'down', ...b, maxAgeMs } };
    } catch (err) {
      return { [key]: { status: 'down', message: this.failure(err) } };
    }
  }

  /**
   * What a failover would mean (docs/OPERATIONS.md, "Replication and failover"): `mode` (`single`,
   * `synchronous`, `asynchronous`, `standby`) and how many `warnings`; with `health.detailed`, the settings,
   * the standbys and the warnings' text. Up unless the settings cannot be read or the module is connected
   * to a standby: an asynchronous setup is reported, not failed (a restart would not change it).
   */
  async replication(key = 'replication'): Promise<DurableHealthResult> {
    try {
      const r = replicationReport(await this.replicationStore.read());
      const status = r.mode === 'standby' ? 'down' : 'up';
      if (!this.opts.detailed) return { [key]: { status, mode: r.mode, warnings: r.warnings.length } };
      const { mode, synchronousCommit, synchronousStandbyNames, standbys, warnings } = r;
      return { [key]: { status, mode, synchronousCommit, synchronousStandbyNames, standbys, warnings } };
    } catch (err) {
      return { [key]: { status: 'down', message: this.failure(err) } };
    }
  }

  /** The error's text with `health.detailed`, else the generic DATABASE_UNREACHABLE. */
  private failure(err: unknown): string {
    return this.opts.detailed ? String((err as Error)?.message ?? err) : DATABASE_UNREACHABLE;
  }
}
