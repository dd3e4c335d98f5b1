import type { INestApplicationContext } from '@nestjs/common';
import { ScheduleRunner } from '../maintenance/schedule-runner.service';
import { ScheduleStore } from '../store/schedules.store';
import { rewindSchedule } from '../store/test-controls';
import { nextTick } from '../util/cron-ticks';

/**
 * Fires the schedule `name` (a `@DurableCron`, or one made with `DurableSchedules.create`) now, through
 * the statement its regular firing uses, and resolves with the ids of the runs it started: in place of
 * `update ai_schedules set next_at = ...` and waiting for the reconciler. A schedule not yet due fires
 * its **next regular tick early**: the run is the one that tick starts (its kind, its input with
 * `schedule` and `scheduledAt` = that tick, the key `cron:<name>:<tick>`), and the schedule then waits
 * for the tick after it, so that tick is neither skipped nor fired twice. A due schedule fires as the
 * reconciler would (its `catchUp` policy). Its `overlap` policy applies as at the tick: `[]` when it
 * held the tick back. The app's own `@DurableCron` schedules are declared first if no schedule job of
 * this process has yet (the worker and reconciler may be off). Drive the runs with `driveRun`.
 * `ScheduleNotFoundError` when no schedule has this name; `InvalidArgumentError` when it is paused.
 * @example
 * ```ts
 * const [runId] = await fireSchedule(app, 'nightly-report');
 * expect((await driveRun(app, runId)).status).toBe('succeeded');
 * ```
 */
export async function fireSchedule(app: INestApplicationContext, name: string): Promise<string[]> {
  const runner = app.get(ScheduleRunner, { strict: false });
  await runner.declareOnce();
  return runner.fireNow(name);
}

/**
 * `advanceTestClock`'s part for schedules: fires every schedule whose ticks the test clock (`aheadMs`
 * ahead of the database's) has passed, each by its catch-up policy, keyed and dated by those ticks.
 * Such a schedule then waits for its tick after the test clock's time; when the test clock starts from
 * the wall clock again (`fromWallClock`: it was reset), schedules fired ahead so wait for their tick
 * after the database's clock again. Runs started. @internal
 */
export async function fireSchedulesAhead(
  app: INestApplicationContext,
  aheadMs: number,
  fromWallClock: boolean,
): Promise<number> {
  const runner = app.get(ScheduleRunner, { strict: false });
  await runner.declareOnce();
  if (fromWallClock) {
    const store = app.get(ScheduleStore, { strict: false });
    const now = await store.now();
    for (const s of await store.list())
      if (!s.paused) await rewindSchedule(app, s.name, nextTick(s.cron, s.timezone, now));
  }
  return runner.fireDue(aheadMs);
}
