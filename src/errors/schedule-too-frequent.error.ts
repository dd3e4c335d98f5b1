import { DurableExecutionError } from './durable-execution.error';

/**
 * `DurableSchedules.create` (the admin API's `POST api/schedules`, the CLI's `create-schedule`) with a
 * cron that fires more often than `limits.minScheduleIntervalMs` allows: two of its ticks are
 * `intervalMs` apart. Nothing was written. With `DurableExceptionFilter`, a 400. A `@DurableCron` in
 * the code is not checked: the floor is for schedules made at run time, by callers the code does not
 * know.
 */
export class ScheduleTooFrequentError extends DurableExecutionError {
  declare readonly code: 'DURABLE_SCHEDULE_TOO_FREQUENT';
  constructor(
    /** The name it was to have. */
    public readonly scheduleName: string,
    /** Its cron expression. */
    public readonly cron: string,
    /** The shortest time between two of its ticks found (ms). */
    public readonly intervalMs: number,
    /** The floor (`limits.minScheduleIntervalMs`). */
    public readonly minIntervalMs: number,
  ) {
    super(
      'DURABLE_SCHEDULE_TOO_FREQUENT',
      `Schedule ${JSON.stringify(scheduleName.slice(0, 200))} was not created: its cron ` +
        `${JSON.stringify(cron.slice(0, 200))} fires ${seconds(intervalMs)} apart, more often than the ` +
        `${seconds(minIntervalMs)} a schedule made at run time may (limits.minScheduleIntervalMs). Choose a cron ` +
        'that fires less often, declare the schedule in code with @DurableCron, or lower the limit in the module options.',
    );
  }
}

const seconds = (ms: number): string => (ms % 1000 ? `${ms} ms` : `${ms / 1000} s`);
