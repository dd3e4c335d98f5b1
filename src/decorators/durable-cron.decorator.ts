import { CRON_METADATA } from '../durable-execution.constants';
import { DurableUsageError } from '../errors/durable-usage.error';
import type { CronMetadata, DurableCronOptions } from '../interfaces/step-options.interface';
import { cronPackage, cronProblem } from '../util/cron';

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
  const meta: CronMetadata = {
    cron,
    name: options.name,
    timezone: options.timezone ?? 'UTC',
    input: options.input ?? {},
    catchUp: options.catchUp ?? 'latest',
    overlap: options.overlap ?? 'allow',
  };
  const problem = cronOptionsProblem(meta);
  if (problem) throw new DurableUsageError(`@DurableCron('${String(cron)}'): ${problem}`);
  return (target) => {
    const list = (Reflect.getOwnMetadata(CRON_METADATA, target) as CronMetadata[] | undefined) ?? [];
    Reflect.defineMetadata(CRON_METADATA, [...list, meta], target);
  };
}

/** What is wrong with a schedule's options, naming the field; undefined when nothing. */
function cronOptionsProblem(m: CronMetadata): string | undefined {
  const cron = cronProblem(m.cron);
  if (cron) return `the expression ${cron}`;
  try {
    new (cronPackage().CronTime)(m.cron, m.timezone);
  } catch {
    return `timezone must be an IANA time zone such as 'Europe/Berlin', got ${JSON.stringify(m.timezone)}`;
  }
  if (m.name !== undefined && (typeof m.name !== 'string' || !m.name || m.name.length > 200))
    return `name must be a non-empty string of at most 200 characters, got ${JSON.stringify(m.name)}`;
  if (!['latest', 'all', 'skip'].includes(m.catchUp))
    return `catchUp must be 'latest', 'all' or 'skip', got ${JSON.stringify(m.catchUp)}`;
  if (!['allow', 'skip'].includes(m.overlap))
    return `overlap must be 'allow' or 'skip', got ${JSON.stringify(m.overlap)}`;
  if (typeof m.input !== 'object' || m.input === null || Array.isArray(m.input))
    return 'input must be a JSON object (the run also gets schedule and scheduledAt)';
  return undefined;
}
