import { Inject, Injectable, Logger } from '@nestjs/common';
import { DURABLE_EXECUTION_OPTIONS } from '../durable-execution.constants';
import { NoWorkerForKindError } from '../errors/no-worker-for-kind.error';
import { ScheduleConflictError } from '../errors/schedule-conflict.error';
import { ScheduleNotFoundError } from '../errors/schedule-not-found.error';
import type { ResolvedDurableOptions } from '../options/durable-execution-options.interface';
import { WorkerPresenceStore } from '../store/worker-presence.store';
import { ScheduleRow, ScheduleStore } from '../store/schedules.store';
import { requireText } from '../util/arguments';
import { nextTick, scheduleOf, scheduleProblem, shortestInterval } from '../util/cron-ticks';
import { encodeValue } from '../util/codec';
import { ScheduleTooFrequentError } from '../errors/schedule-too-frequent.error';
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

/** Options of `DurableSchedules.create`: those of `@DurableCron` but `name`, and `replace`. */
export interface CreateScheduleOptions extends Omit<DurableCronOptions, 'name'> {
  /**
   * Replace the schedule made at run time that has this name, if any (default false: its name is a
   * ScheduleConflictError). A `@DurableCron`'s name is refused either way.
   */
  replace?: boolean;
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
  private readonly logger = new Logger('DurableExecution');

  /** @internal Created by Nest dependency injection: not part of the API. */
  constructor(
    private readonly store: ScheduleStore,
    private readonly registry: DurableRegistry,
    private readonly presence: WorkerPresenceStore,
    @Inject(DURABLE_EXECUTION_OPTIONS) private readonly options: ResolvedDurableOptions,
  ) {}

  /** Every schedule, by name. */
  async list(): Promise<ScheduleView[]> {
    return (await this.store.list()).map(toView);
  }

  /**
   * Creates a schedule at run time: runs of `kind` on every tick of `cron`, as `@DurableCron` does
   * (same options; `name` is required here), from its first tick after now. A name a schedule made at
   * run time holds is a ScheduleConflictError unless `replace: true`; a name a `@DurableCron` holds is
   * refused. InvalidArgumentError naming the field for a bad option, before anything is written:
   * `name`, `kind` and `cron` are identifiers (at most 200 characters, no control, line separator or
   * bidi control character), and a cron that never fires is refused. A cron that fires more often than
   * `limits.minScheduleIntervalMs` (default once a minute) is refused with ScheduleTooFrequentError
   * (`@DurableCron` in the code may go lower); `input` is held to `limits.maxInputBytes`, checked while
   * it is walked (PayloadTooLargeError). A kind neither registered here nor served by a live worker is
   * logged as a warning, or refused with NoWorkerForKindError under `unservedKinds: 'refuse'` (as
   * `start()` does).
   */
  async create(
    name: string,
    kind: string,
    cron: string,
    options: CreateScheduleOptions = {},
  ): Promise<ScheduleView> {
    requireShortText(name, 'name');
    requireShortText(kind, 'kind');
    const { replace, ...cronOptions } = options;
    if (replace !== undefined && typeof replace !== 'boolean')
      throw new InvalidArgumentError('replace', `must be true or false, got ${typeof replace}`);
    const meta = scheduleOf(cron, { ...cronOptions, name });
    const problem = scheduleProblem(meta);
    if (problem) throw new InvalidArgumentError(problem.field, problem.reason);
    const floor = this.options.limits.minScheduleIntervalMs;
    if (floor > 0) {
      const gap = shortestInterval(meta.cron, meta.timezone, new Date(), floor);
      if (gap < floor) throw new ScheduleTooFrequentError(name, cron, gap, floor);
    }
    // Its size checked while it is walked, before anything else reads it (its key, the store).
    const input = encodeValue(meta.input, `input of schedule "${name}"`, this.options.limits.maxInputBytes)
      .value as Record<string, unknown>;
    meta.input = input;
    await this.checkServed(kind);
    const kindMeta = this.registry.getWorkflow(kind)?.meta;
    const concurrencyKey = scheduleKeyOf(kindMeta, name, meta);
    // The kind's attempts where this process registers it; else the firing process's, at each tick.
    const maxAttempts = kindMeta?.maxAttempts ?? null;
    // A name freed between the refused write and the look at its holder is written on a second try.
    for (let attempt = 0; ; attempt++) {
      const nextAt = nextTick(meta.cron, meta.timezone, await this.store.now());
      const row = await this.store.create(
        { ...meta, name, kind, nextAt, concurrencyKey, maxAttempts },
        replace === true,
      );
      if (row) return toView(row);
      const holder = await this.store.get(name);
      if (holder?.source === 'code')
        throw new InvalidArgumentError(
          'name',
          `"${name}" is a @DurableCron schedule of the code: choose another name`,
        );
      if (holder || attempt > 0) throw new ScheduleConflictError(name);
    }
  }

  /** A schedule's kind that nothing serves: a warning, or NoWorkerForKindError (`unservedKinds`). */
  private async checkServed(kind: string): Promise<void> {
    if (this.registry.getWorkflow(kind)) return;
    const refuse = this.options.unservedKinds === 'refuse';
    if (await this.presence.served(kind).catch((err: unknown) => (refuse ? Promise.reject(err) : true)))
      return;
    if (refuse) throw new NoWorkerForKindError(kind, 'schedule');
    this.logger.warn(
      `schedule of kind ${JSON.stringify(kind.slice(0, 80))}, which no live worker serves (none registers ` +
        `@DurableWorkflow(${JSON.stringify(kind.slice(0, 80))}), or they all stopped): its runs wait until one does. ` +
        `unservedKinds: 'refuse' makes DurableSchedules.create refuse it`,
    );
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
