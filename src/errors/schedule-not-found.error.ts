import { DurableExecutionError } from './durable-execution.error';

/** No `@DurableCron` schedule has this name (in the database). */
export class ScheduleNotFoundError extends DurableExecutionError {
  declare readonly code: 'DURABLE_SCHEDULE_NOT_FOUND';
  constructor(public readonly scheduleName: string) {
    super(
      'DURABLE_SCHEDULE_NOT_FOUND',
      `No schedule is named "${scheduleName}" (DurableSchedules.list() names them; a schedule exists once a process that registers its @DurableCron workflow has started).`,
    );
  }
}
