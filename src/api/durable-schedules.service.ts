import { Injectable } from '@nestjs/common';
import { ScheduleNotFoundError } from '../errors/schedule-not-found.error';
import { ScheduleRow, ScheduleStore } from '../store/schedules.store';
import { requireText } from '../util/arguments';
import { nextTick, scheduleOf, scheduleProblem } from '../util/cron-ticks';
import { InvalidArgumentError } from '../errors/invalid-argument.error';
import { DurableRegistry } from '../engine/durable.registry';
import { requireShortText, scheduleKeyOf } from '../util/run-keys';
import type { DurableCronOptions } from '../interfaces/step-options.interface';

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
  overlap: 'allow' | 'skip' | 'queue';
  /** The next tick it will fire (database clock). */
  nextAt: Date;
  /** The last tick it fired a run for, or null. */
  lastAt: Date | null;
  /** The idempotency key of that run (`cron:<name>:<tick>`), or null. */
  lastRunKey: string | null;
  /** Paused: its ticks start nothing until `resume`. */
  paused: boolean;
  /** `code`: declared by a `@DurableCron`; `api`: created with `DurableSchedules.create`. */
  source: 'code' | 'api';
  /** The key of the runs it starts, for its kind's per-key limits (`DurableCronOptions.concurrencyKey`), or null. */
  concurrencyKey: string | null;
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
  source: r.source,
  concurrencyKey: r.concurrencyKey,
});

/**
 * The `@DurableCron` schedules in the database: list them with their next tick, pause and resume one.
 * Injectable anywhere the module is imported. See docs/FLOW-CONTROL.md.
 */
@Injectable()
export class DurableSchedules {
  /** @internal Created by Nest dependency injection: not part of the API. */
  constructor(
    private readonly store: ScheduleStore,
    private readonly registry: DurableRegistry,
  ) {}

  /** Every schedule, by name. */
  async list(): Promise<ScheduleView[]> {
    return (await this.store.list()).map(toView);
  }

  /**
   * Creates a schedule at run time (or replaces one created so): runs of `kind` on every tick of `cron`,
   * as `@DurableCron` does (same options; `name` is required here), from its first tick after now. A
   * name a `@DurableCron` holds is refused. InvalidArgumentError naming the field for a bad option,
   * before anything is written: `name`, `kind` and `cron` are identifiers (at most 200 characters, no
   * control, line separator or bidi control character), and a cron that never fires is refused.
   */
  async create(
    name: string,
    kind: string,
    cron: string,
    options: Omit<DurableCronOptions, 'name'> = {},
  ): Promise<ScheduleView> {
    requireShortText(name, 'name');
    requireShortText(kind, 'kind');
    const meta = scheduleOf(cron, { ...options, name });
    const problem = scheduleProblem(meta);
    if (problem) throw new InvalidArgumentError(problem.field, problem.reason);
    const nextAt = nextTick(meta.cron, meta.timezone, await this.store.now());
    const concurrencyKey = scheduleKeyOf(this.registry.getWorkflow(kind)?.meta, name, meta);
    const row = await this.store.create({ ...meta, name, kind, nextAt, concurrencyKey });
    if (!row)
      throw new InvalidArgumentError(
        'name',
        `"${name}" is a @DurableCron schedule of the code: choose another name`,
      );
    return toView(row);
  }

  /** Deletes a schedule created with `create` (its runs stay). A `@DurableCron`'s is refused: pause it. */
  async remove(name: string): Promise<void> {
    const source = await this.store.remove(requireText(name, 'name'));
    if (source === 'code')
      throw new InvalidArgumentError(
        'name',
        `"${name}" is a @DurableCron schedule of the code: pause it instead`,
      );
    if (!source) throw new ScheduleNotFoundError(name);
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
    const current = await this.store.get(name);
    if (!current) throw new ScheduleNotFoundError(name);
    const next = paused ? null : nextTick(current.cron, current.timezone, current.dbNow);
    const row = await this.store.setPaused(name, paused, next);
    if (!row) throw new ScheduleNotFoundError(name);
    return toView(row);
  }
}
