import { CRON_METADATA } from '../durable-execution.constants';
import { DurableUsageError } from '../errors/durable-usage.error';
import type { CronMetadata, DurableCronOptions } from '../interfaces/step-options.interface';
import { scheduleOf, scheduleProblem } from '../util/cron-ticks';

/** The input a scheduled run gets: the schedule's `input`, its name and the tick (ISO, UTC). */
export interface ScheduledRunInput {
  /** The schedule's name. */
  schedule: string;
  /** The tick this run is for (ISO 8601, UTC). */
  scheduledAt: string;
}

/**
 * Starts a run of the decorated `@DurableWorkflow` on every tick of `cron` (the syntax of
 * `@nestjs/schedule`, seconds optional), exactly once per tick however many pods run the module: the
 * tick is the run's idempotency key, and the schedule row (`ai_schedules`) moves to its next tick in the
 * same statement that inserts the run. Ticks are computed against the database's clock. Fired by every
 * process that runs the reconciler (about once a second). See docs/FLOW-CONTROL.md.
 * @example
 * ```ts
 * @DurableCron('0 2 * * *', { timezone: 'Europe/Berlin' })
 * @DurableWorkflow('nightly-report')
 * export class NightlyReport { async run(input: ScheduledRunInput, ctx: RunContext) { ... } }
 * ```
 */
export function DurableCron(cron: string, options: DurableCronOptions = {}): ClassDecorator {
  const meta = scheduleOf(cron, options);
  const problem = scheduleProblem(meta);
  if (problem)
    throw new DurableUsageError(`@DurableCron('${String(cron)}'): ${problem.field} ${problem.reason}`);
  return (target) => {
    const list = (Reflect.getOwnMetadata(CRON_METADATA, target) as CronMetadata[] | undefined) ?? [];
    Reflect.defineMetadata(CRON_METADATA, [...list, meta], target);
  };
}
