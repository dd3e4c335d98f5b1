import { Inject, Injectable, Logger, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import type * as Prom from 'prom-client';
import { DurableWorker } from '../engine/worker.service';
import type { DurableObserver } from '../interfaces/durable-observer.interface';
import { DurableObservers } from '../engine/durable-observers';
import { abandonedBodies } from '../engine/live-calls';
import { DURABLE_OBSERVABILITY_OPTIONS } from './observability.constants';
import type { DurableObservabilityOptions, MetricsRegistryLike } from './observability-options.interface';
import { loadOptional } from '../util/optional-dependency';
import { RunStats, RunStatsReader } from '../store/run-stats.reader';

const BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];
const STATUSES = ['pending', 'running', 'waiting', 'succeeded', 'failed', 'cancelled', 'dead_lettered'];

/**
 * Prometheus metrics on a registry of its own (unless one is given): counters and histograms fed by the
 * engine's observer events (no SQL on the hot path), gauges read from the database at scrape time in one
 * statement, cached for `snapshotTtlMs`. Names are listed in docs/OPERATIONS.md.
 */
@Injectable()
export class DurableMetrics implements OnModuleInit, OnModuleDestroy {
  private readonly logger = new Logger('DurableExecution');
  private reg!: Prom.Registry;
  private remove?: () => void;
  private snapshot?: { at: number; value: Promise<RunStats> };

  constructor(
    private readonly observers: DurableObservers,
    private readonly statsReader: RunStatsReader,
    private readonly worker: DurableWorker,
    @Inject(DURABLE_OBSERVABILITY_OPTIONS) private readonly options: DurableObservabilityOptions,
  ) {}

  /** The registry the metrics are on (merge it into yours with prom-client's `Registry.merge`). */
  get registry(): MetricsRegistryLike {
    return this.reg;
  }

  /** The Prometheus text exposition of every metric on the registry. */
  metrics(): Promise<string> {
    return this.reg.metrics();
  }

  onModuleInit(): void {
    const o = this.options.metrics || {};
    const prom = loadOptional<typeof Prom>('prom-client', 'DurableObservabilityModule metrics');
    this.reg = (o.registry as Prom.Registry | undefined) ?? new prom.Registry();
    if (o.collectDefaultMetrics) prom.collectDefaultMetrics({ register: this.reg });
    const p = o.prefix ?? 'durable_';
    const registers = [this.reg];
    const buckets = o.buckets ?? BUCKETS;
    const counter = (name: string, help: string, labelNames: string[] = []) =>
      new prom.Counter({ name: p + name, help, labelNames, registers });
    const histogram = (name: string, help: string, labelNames: string[]) =>
      new prom.Histogram({ name: p + name, help, labelNames, buckets, registers });
    const stats = () => this.stats();
    const gauge = (
      name: string,
      help: string,
      set: (g: Prom.Gauge, s: RunStats) => void,
      labels?: string[],
    ) =>
      new prom.Gauge({
        name: p + name,
        help,
        labelNames: labels ?? [],
        registers,
        async collect() {
          const s = await stats();
          if (s) set(this, s);
        },
      });

    gauge(
      'runs',
      'Runs by status (database, at scrape time).',
      (g, s) => {
        for (const st of STATUSES) g.set({ status: st }, s.byStatus[st] ?? 0);
      },
      ['status'],
    );
    gauge('queue_depth', 'Runs due now and not yet claimed.', (g, s) => g.set(s.queueDepth));
    gauge('queue_oldest_due_age_seconds', 'How long the oldest due run has waited.', (g, s) =>
      g.set(s.oldestDueAgeMs / 1000),
    );
    gauge(
      'runs_due_without_worker',
      'Runs due now whose kind no live worker serves (no presence row lists it), by kind.',
      (g, s) => {
        g.reset();
        for (const [kind, n] of Object.entries(s.dueWithoutWorker)) g.set({ workflow: kind }, n);
      },
      ['workflow'],
    );
    gauge(
      'queue_depth_by_kind',
      'Runs due now and not yet claimed, by kind.',
      (g, s) => {
        g.reset();
        for (const [kind, d] of Object.entries(s.dueByKind)) g.set({ workflow: kind }, d.queueDepth);
      },
      ['workflow'],
    );
    gauge(
      'queue_oldest_due_age_seconds_by_kind',
      'How long the oldest due run of each kind has waited.',
      (g, s) => {
        g.reset();
        for (const [kind, d] of Object.entries(s.dueByKind))
          g.set({ workflow: kind }, d.oldestDueAgeMs / 1000);
      },
      ['workflow'],
    );
    gauge(
      'runs_held_back',
      'Due runs held back because a concurrency limit is full, by scope (["kind"] or ["kind","key"]).',
      (g, s) => {
        g.reset();
        for (const [scope, n] of Object.entries(s.heldBack)) g.set({ scope }, n);
      },
      ['scope'],
    );
    gauge(
      'schedule_next_tick_timestamp_seconds',
      'The next tick of each @DurableCron schedule (Unix time; database clock).',
      (g, s) => {
        g.reset();
        for (const x of s.schedules) g.set({ schedule: x.name }, Date.parse(x.nextAt) / 1000);
      },
      ['schedule'],
    );
    gauge(
      'schedule_last_tick_timestamp_seconds',
      'The last tick each @DurableCron schedule started a run for (Unix time).',
      (g, s) => {
        g.reset();
        for (const x of s.schedules) if (x.lastAt) g.set({ schedule: x.name }, Date.parse(x.lastAt) / 1000);
      },
      ['schedule'],
    );
    gauge(
      'budget_used',
      'Use of each model budget in the window ending now: calls admitted (unit="requests") and tokens charged (unit="tokens").',
      (g, s) => {
        g.reset();
        for (const b of s.budgets) {
          g.set({ budget: b.name, unit: 'requests' }, b.usedRequests);
          g.set({ budget: b.name, unit: 'tokens' }, b.usedTokens);
        }
      },
      ['budget', 'unit'],
    );
    gauge('commands_in_doubt', 'Commands whose outcome a crash hid, not yet settled.', (g, s) =>
      g.set(s.inDoubtCommands),
    );
    const worker = this.worker;
    new prom.Gauge({
      name: p + 'worker_in_flight',
      help: 'Runs this process is driving now.',
      registers,
      collect() {
        this.set(worker.inFlightCount);
      },
    });
    new prom.Gauge({
      name: p + 'abandoned_calls_running',
      help: 'Call bodies this process gave up on (a timeout, a stop, run() returned) that still run.',
      registers,
      collect() {
        this.set(abandonedBodies.running);
      },
    });
    const claims = counter('runs_claimed_total', 'Runs claimed by this process.', ['workflow']);
    const claimErrors = counter('worker_claim_errors_total', 'Claim statements that failed.');
    const attempts = counter('run_attempts_total', 'Run attempts by how they ended.', [
      'workflow',
      'outcome',
    ]);
    const leaseLosses = counter('lease_losses_total', 'Attempts that lost their lease.', ['workflow']);
    const reconciled = counter('reconciler_actions_total', 'Expired leases handled.', ['action']);
    const attemptSeconds = histogram('run_attempt_duration_seconds', 'Claim to resting point.', [
      'workflow',
      'outcome',
    ]);
    const stepSeconds = histogram('step_duration_seconds', 'Executed steps and commands (not replays).', [
      'workflow',
      'step',
      'step_kind',
      'outcome',
    ]);

    const observer: DurableObserver = {
      workerTicked: (t) => {
        if (t.error) claimErrors.inc();
        for (const kind of t.claimedKinds) claims.inc({ workflow: kind });
      },
      runAttemptEnded: (info, outcome, ms) => {
        attempts.inc({ workflow: info.kind, outcome });
        attemptSeconds.observe({ workflow: info.kind, outcome }, ms / 1000);
        if (outcome === 'lease_lost') leaseLosses.inc({ workflow: info.kind });
      },
      stepEnded: (s, outcome, ms) =>
        stepSeconds.observe(
          { workflow: s.run.kind, step: s.name, step_kind: s.stepKind, outcome },
          ms / 1000,
        ),
      reconciled: (r) => {
        if (r.requeued) reconciled.inc({ action: 'requeued' }, r.requeued);
        if (r.deadLettered) reconciled.inc({ action: 'dead_lettered' }, r.deadLettered);
      },
    };
    this.remove = this.observers.add(observer);
  }

  onModuleDestroy(): void {
    this.remove?.();
  }

  /** Runs by status, backlog and in-doubt commands: one statement, cached for `snapshotTtlMs`. */
  private async stats(): Promise<RunStats | null> {
    const ttl = (this.options.metrics || {}).snapshotTtlMs ?? 5000;
    if (!this.snapshot || Date.now() - this.snapshot.at > ttl) {
      this.snapshot = { at: Date.now(), value: this.statsReader.read() };
    }
    try {
      return await this.snapshot.value;
    } catch (err) {
      this.snapshot = undefined;
      this.logger.warn(`metrics: could not read run stats: ${(err as Error).message}`);
      return null;
    }
  }
}
