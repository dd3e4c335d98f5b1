import { DurableExecutionError } from './durable-execution.error';

/**
 * `DurableSchedules.create` with the name of a schedule that already exists (made at run time) and
 * without `replace: true`. Nothing was written.
 */
export class ScheduleConflictError extends DurableExecutionError {
  declare readonly code: 'DURABLE_SCHEDULE_CONFLICT';
  constructor(public readonly scheduleName: string) {
    super(
      'DURABLE_SCHEDULE_CONFLICT',
      `A schedule is already named ${JSON.stringify(scheduleName.slice(0, 200))}: nothing was written. ` +
        'Choose another name, or pass replace: true (admin API body "replace": true, CLI --replace) to replace it.',
    );
  }
}
