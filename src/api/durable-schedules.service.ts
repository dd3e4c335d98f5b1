import { Injectable } from '@nestjs/common';
import { ScheduleNotFoundError } from '../errors/schedule-not-found.error';
import { ScheduleRow, ScheduleStore } from '../store/schedules.store';
import { requireText } from '../util/arguments';
import { nextTick } from '../util/cron-ticks';

/** A `@DurableCron` schedule, as `DurableSchedules.list()` returns it. */
export interface ScheduleView {
  /** Its name (default: the workflow's kind). */
  name: string;
  /** The kind of the runs it starts. */
  kind: string;
  /** Its cron expression (`@nestjs/schedule` syntax). */
  cron: string;
  /** The IANA time zone the expression is read in. */
  timezone: string;
  /** What missed ticks start (`DurableCronOptions.catchUp`). */
  catchUp: 'latest' | 'all' | 'skip';
  /** Whether a tick starts a run while the last one has not ended (`DurableCronOptions.overlap`). */
  overlap: 'allow' | 'skip';
  /** The next tick it will fire (database clock). */
  nextAt: Date;
  /** The last tick it fired a run for, or null. */
  lastAt: Date | null;
  /** The idempotency key of that run (`cron:<name>:<tick>`), or null. */
  lastRunKey: string | null;
  /** Paused: its ticks start nothing until `resume`. */
  paused: boolean;
}

const toView = (r: ScheduleRow): ScheduleView => ({
  name: r.name,
  kind: r.kind,
  cron: r.cron,
  timezone: r.timezone,
  catchUp: r.catchUp,
  overlap: r.overlap,
  nextAt: r.nextAt,
  lastAt: r.lastAt,
  lastRunKey: r.lastKey,
  paused: r.paused,
});

/**
 * The `@DurableCron` schedules in the database: list them with their next tick, pause and resume one.
 * Injectable anywhere the module is imported. See docs/FLOW-CONTROL.md.
 */
@Injectable()
export class DurableSchedules {
  /** @internal Created by Nest dependency injection: not part of the API. */
  constructor(private readonly store: ScheduleStore) {}

  /** Every schedule, by name. */
  async list(): Promise<ScheduleView[]> {
    return (await this.store.list()).map(toView);
  }

  /** Stops firing it until `resume`; ticks while paused start nothing. ScheduleNotFoundError for an unknown name. */
  async pause(name: string): Promise<ScheduleView> {
    return this.set(name, true);
  }

  /** Fires it again from its next tick after now (the ticks missed while paused start nothing). */
  async resume(name: string): Promise<ScheduleView> {
    return this.set(name, false);
  }

  private async set(name: string, paused: boolean): Promise<ScheduleView> {
    requireText(name, 'name');
    const current = (await this.store.list()).find((s) => s.name === name);
    if (!current) throw new ScheduleNotFoundError(name);
    const next = paused ? null : nextTick(current.cron, current.timezone, await this.store.now());
    const row = await this.store.setPaused(name, paused, next);
    if (!row) throw new ScheduleNotFoundError(name);
    return toView(row);
  }
}
