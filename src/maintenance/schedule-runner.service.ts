import {
  Inject,
  Injectable,
  Logger,
  BeforeApplicationShutdown,
  OnApplicationBootstrap,
} from '@nestjs/common';
import { DURABLE_EXECUTION_OPTIONS } from '../durable-execution.constants';
import { DurableRegistry } from '../engine/durable.registry';
import { DURABLE_JOB_NAMES, DurableJobs, jobName } from '../engine/durable-jobs';
import { replayOnly } from '../engine/replay-check-report';
import type { ResolvedDurableOptions } from '../options/durable-execution-options.interface';
import { ScheduleRow, ScheduleStore } from '../store/schedules.store';
import { ScheduleNotFoundError } from '../errors/schedule-not-found.error';
import { InvalidArgumentError } from '../errors/invalid-argument.error';
import { LimitsStore } from '../store/limits.store';
import { dueTicks, nextTick } from '../util/cron-ticks';
import { IntervalTask } from './interval-task';
import { pausePoint } from '../engine/pause-points';
import { requireShortText, scheduleKeyOf } from '../util/run-keys';
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
export class ScheduleRunner implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('DurableExecution');
  private readonly task = new IntervalTask('schedules', async () => void (await this.tick()));
  private declared = false;
  /** `@DurableCron` names a schedule made at run time holds, each logged once; declared again every tick. */
  private readonly held = new Set<string>();

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

  /**
   * Stops the job and waits for its tick in flight before the shutdown phase that ends the pool
   * (Nest runs one phase's hooks together; `onApplicationShutdown` is the pool's).
   */
  beforeApplicationShutdown(): Promise<void> {
    return this.task.stop();
  }

  /**
   * Declares this process's schedules (first time), then fires what is due; and wakes runs held back by
   * a rate limit whose tokens are free again (a token frees by time, so a second here, not the
   * reconciler's interval, bounds the wait past it). Runs fired.
   */
  async tick(): Promise<number> {
    if (!this.declared || this.held.size) await this.declare();
    await this.limits.wakeHeld();
    return this.fireDue(0);
  }

  /**
   * Fires every schedule due by the database's clock plus `aheadMs` (the testing kit's clock, which
   * runs ahead of it), each by its catch-up policy as of that time. Runs fired.
   */
  async fireDue(aheadMs: number): Promise<number> {
    let started = 0;
    for (const s of await this.store.due(aheadMs)) started += (await this.fireTicks(s, s.dbNow)).started;
    return started;
  }

  /** Declares this process's schedules unless it did (the testing kit's `fireSchedule`). */
  async declareOnce(): Promise<void> {
    if (!this.declared) await this.declare();
  }

  /**
   * Fires schedule `name` now (the testing kit's `fireSchedule`, the CLI's `trigger`): the ticks a
   * firing at `max(now, its next tick)` fires, through the same statement as `tick` (`fireTicks`). So a
   * schedule not yet due fires its next regular tick early (the run that tick starts: same kind,
   * input, `scheduledAt` and key `cron:<name>:<tick>`) and then waits for the tick after it; that
   * tick is neither skipped nor fired twice. A due one fires as `tick` would fire it. The overlap
   * policy applies as at the tick. The ids of the runs started ([] when none: the policy held the tick
   * back, or its run exists). ScheduleNotFoundError for an unknown name; InvalidArgumentError for a
   * paused schedule.
   */
  async fireNow(name: string): Promise<string[]> {
    requireShortText(name, 'name');
    for (let attempt = 0; ; attempt++) {
      const s = await this.store.get(name);
      if (!s) throw new ScheduleNotFoundError(name);
      if (s.paused) throw new InvalidArgumentError('name', `schedule "${name}" is paused: resume it first`);
      const fired = await this.fireTicks(s, s.nextAt > s.dbNow ? s.nextAt : s.dbNow);
      if (fired.locked) return fired.runIds;
      // Another process is firing it, or it moved on since it was read: read it again.
      if (attempt >= 50) throw new Error(`schedule "${name}" is being fired by another process: try again`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  /** Fires the ticks of schedule `s` due by `now` (by its catch-up policy) in one statement (FIRE_SQL). */
  private async fireTicks(s: ScheduleRow, now: Date) {
    const { fire, next } = dueTicks(s.cron, s.timezone, s.nextAt, now, s.catchUp);
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
    const fired = await this.store.fire(s, next, ticks, maxAttempts);
    await pausePoint({ point: 'after-write', ...where, detail: 'schedule.fire' });
    return fired;
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
        maxAttempts: this.registry.getWorkflow(kind)?.meta.maxAttempts ?? null,
      })),
    );
    const names = new Set<string>();
    for (const s of schedules) {
      if (names.has(s.name))
        this.logger.error(`two @DurableCron schedules are named '${s.name}': give each its own name`);
      names.add(s.name);
    }
    const held = await this.store.declare(kinds, schedules);
    for (const name of held) {
      if (!this.held.has(name))
        this.logger.error(
          `@DurableCron '${name}' is not declared: a schedule made at run time (admin API, CLI or ` +
            `DurableSchedules.create) holds the name, and the code does not replace it. Remove that one ` +
            `(remove-schedule ${name}: this @DurableCron then takes the name at the next tick), or give the ` +
            `@DurableCron its own name`,
        );
    }
    for (const name of this.held) if (!held.includes(name)) this.held.delete(name);
    for (const name of held) this.held.add(name);
    this.declared = true;
  }
}
