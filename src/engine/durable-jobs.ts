import { Injectable, Logger } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import type * as Schedule from '@nestjs/schedule';
import type { SchedulerRegistry } from '@nestjs/schedule';
import { DEFAULT_SCHEMA } from '../options/schema-name';
import { loadedOptional } from '../util/optional-dependency';
import { cronPackage } from '../util/cron';

/**
 * Names of the module's periodic jobs in the app's `SchedulerRegistry` (when the app imports
 * `ScheduleModule.forRoot()`): an operator lists and stops them like the app's own. A module on a
 * `database.schema` of its own adds `:<schema>` (two modules in one app never collide).
 */
export const DURABLE_JOB_NAMES = {
  /** The worker's claim poll (an interval: `worker.pollIntervalMs`). */
  workerPoll: 'durable-execution:worker-poll',
  /** The reconciler's sweep of expired leases (`reconciler.intervalMs` or `reconciler.cron`). */
  reconciler: 'durable-execution:reconciler',
  /** The worker's presence row, renewed on `worker.presenceIntervalMs` (which kinds it serves). */
  presence: 'durable-execution:worker-presence',
  /** `@DurableCron` schedules fired (every second, where the reconciler runs). */
  schedules: 'durable-execution:schedules',
  /** Retention's sweep (`DurableRetentionModule`: `intervalMs` or `cron`). */
  retention: 'durable-execution:retention',
} as const;

/** How often a job runs: every so many milliseconds, or on a cron expression (`CronExpression.EVERY_5_SECONDS`). */
export type JobCadence = { everyMs: number } | { cron: string };

/** A job the module started. @internal */
export interface ScheduledJob {
  /** Stops it (and removes it from the registry, unless `@nestjs/schedule` already did at shutdown). */
  stop(): void;
}

/**
 * Starts the module's periodic jobs on `@nestjs/schedule`: when the app imports
 * `ScheduleModule.forRoot()`, each job is added to its `SchedulerRegistry` under a stable name
 * (`DURABLE_JOB_NAMES`); without one the module keeps the same timers itself. The module never calls
 * `forRoot()` (a second one would make the app's own `@Interval`/`@Cron` fire twice). `@nestjs/schedule`
 * clears every registered job in `beforeApplicationShutdown`: what must outlive that (the worker's
 * heartbeat and drain timing) is not a job. @internal
 */
@Injectable()
export class DurableJobs {
  private readonly logger = new Logger('DurableExecution');

  constructor(private readonly moduleRef: ModuleRef) {}

  /**
   * The app's SchedulerRegistry, when it imports `ScheduleModule.forRoot()`. `@nestjs/schedule` is never
   * loaded here (it costs a boot ~15 ms): an app that imports its module has loaded it already. A copy
   * this process cannot load (an ESM-only major under jest) means no registry, and the module's own
   * timers.
   */
  private registry(): SchedulerRegistry | undefined {
    const schedule = loadedOptional<typeof Schedule>('@nestjs/schedule');
    if (!schedule) return undefined;
    try {
      return this.moduleRef.get(schedule.SchedulerRegistry, { strict: false });
    } catch {
      return undefined;
    }
  }

  /**
   * Starts `tick` on `cadence` as job `name`. `keepAlive: false` unrefs its timer: the job never keeps
   * a process alive on its own.
   */
  start(name: string, cadence: JobCadence, tick: () => void, keepAlive: boolean): ScheduledJob {
    let registry = this.registry();
    if (registry?.doesExist('interval', name) || registry?.doesExist('cron', name)) {
      this.logger.warn(
        `a job named "${name}" is already in the SchedulerRegistry: this one runs unregistered`,
      );
      registry = undefined;
    }
    if ('everyMs' in cadence) {
      const timer = setInterval(tick, cadence.everyMs);
      if (!keepAlive) timer.unref();
      registry?.addInterval(name, timer);
      return {
        stop: () => {
          clearInterval(timer);
          if (registry?.doesExist('interval', name)) registry.deleteInterval(name);
        },
      };
    }
    const job = cronPackage().CronJob.from({
      cronTime: cadence.cron,
      onTick: tick,
      start: true,
      unrefTimeout: !keepAlive, // as the interval: retention never keeps a process alive on its own
    });
    registry?.addCronJob(name, job as never);
    return {
      stop: () => {
        void job.stop();
        if (registry?.doesExist('cron', name)) registry.deleteCronJob(name);
      },
    };
  }
}

/** A job's name for a module on `schema` (`public` or unset: the names as they are). @internal */
export function jobName(base: string, schema: string | undefined | null): string {
  return schema && schema !== DEFAULT_SCHEMA ? `${base}:${schema}` : base;
}
