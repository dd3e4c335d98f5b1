import { Inject, Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { DURABLE_EXECUTION_OPTIONS } from '../durable-execution.constants';
import { DurableRegistry } from '../engine/durable.registry';
import { DURABLE_JOB_NAMES, DurableJobs, jobName } from '../engine/durable-jobs';
import { replayOnly } from '../engine/replay-check-report';
import type { ResolvedDurableOptions } from '../options/durable-execution-options.interface';
import { ScheduleStore } from '../store/schedules.store';
import { LimitsStore } from '../store/limits.store';
import { dueTicks, nextTick } from '../util/cron-ticks';
import { IntervalTask } from './interval-task';
import { pausePoint } from '../engine/pause-points';
import { scheduleKeyOf } from '../util/run-keys';
import type { CronMetadata } from '../interfaces/step-options.interface';

/** How often a process that runs the reconciler looks for due ticks. */
export const SCHEDULE_INTERVAL_MS = 1000;

/**
 * Fires `@DurableCron` schedules: declares the schedules of the workflows this process registers (once,
 * retried until it succeeds), then every second fires every due schedule's ticks (ScheduleStore.fire:
 * one run per tick however many processes do this at once). Runs where the reconciler runs, as job
 * `durable-execution:schedules` on `@nestjs/schedule`. @internal
 */
@Injectable()
export class ScheduleRunner implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('DurableExecution');
  private readonly task = new IntervalTask('schedules', async () => void (await this.tick()));
  private declared = false;

  constructor(
    private readonly store: ScheduleStore,
    private readonly registry: DurableRegistry,
    @Inject(DURABLE_EXECUTION_OPTIONS) private readonly options: ResolvedDurableOptions,
    private readonly jobs: DurableJobs,
    private readonly limits: LimitsStore,
  ) {}

  onApplicationBootstrap(): void {
    if (!this.options.reconciler.enabled || replayOnly()) return;
    const name = jobName(DURABLE_JOB_NAMES.schedules, this.options.database.schema);
    this.task.start(this.jobs, name, { everyMs: SCHEDULE_INTERVAL_MS }, { keepAlive: false });
  }

  onApplicationShutdown(): Promise<void> {
    return this.task.stop();
  }

  /**
   * Declares this process's schedules (first time), then fires what is due; and wakes runs held back by
   * a rate limit whose tokens are free again (a token frees by time, so a second here, not the
   * reconciler's interval, bounds the wait past it). Runs fired.
   */
  async tick(): Promise<number> {
    if (!this.declared) await this.declare();
    await this.limits.wakeHeld();
    let started = 0;
    for (const s of await this.store.due()) {
      const { fire, next } = dueTicks(s.cron, s.timezone, s.nextAt, s.dbNow, s.catchUp);
      const ticks = fire.map((at) => ({
        at,
        key: `cron:${s.name}:${at.toISOString()}`,
        input: JSON.stringify({ ...s.input, schedule: s.name, scheduledAt: at.toISOString() }),
      }));
      const wf = this.registry.getWorkflow(s.kind);
      const maxAttempts = wf?.meta.maxAttempts ?? this.options.defaultMaxAttempts;
      // Test-only: a firer frozen between reading the schedule and firing it (or reading the answer).
      const where = { runId: `$schedule:${s.name}`, epoch: 0, workerId: this.options.worker.workerId };
      await pausePoint({ point: 'before-write', ...where, detail: 'schedule.fire' });
      started += (await this.store.fire(s, next, ticks, maxAttempts)).started;
      await pausePoint({ point: 'after-write', ...where, detail: 'schedule.fire' });
    }
    return started;
  }

  /** The schedule's key (`scheduleKeyOf`); a key function that throws is logged and gives none. */
  private keyOf(kind: string, name: string, c: CronMetadata): string | null {
    try {
      return scheduleKeyOf(this.registry.getWorkflow(kind)?.meta, name, c);
    } catch (err) {
      this.logger.error(`@DurableCron '${name}': ${(err as Error).message}; its runs get no concurrency key`);
      return null;
    }
  }

  private async declare(): Promise<void> {
    const now = await this.store.now();
    const kinds = this.registry.kinds();
    const schedules = kinds.flatMap((kind) =>
      this.registry.cronSchedules(kind).map((c) => ({
        name: c.name ?? kind,
        kind,
        cron: c.cron,
        timezone: c.timezone,
        input: c.input,
        catchUp: c.catchUp,
        overlap: c.overlap,
        nextAt: nextTick(c.cron, c.timezone, now),
        concurrencyKey: this.keyOf(kind, c.name ?? kind, c),
      })),
    );
    const names = new Set<string>();
    for (const s of schedules) {
      if (names.has(s.name))
        this.logger.error(`two @DurableCron schedules are named '${s.name}': give each its own name`);
      names.add(s.name);
    }
    await this.store.declare(kinds, schedules);
    this.declared = true;
  }
}
