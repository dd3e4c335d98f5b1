/**
 * A case whose first program is started by a durable schedule, not by `start()`: a per-second schedule
 * of the model kind (catch-up `all`, the case's overlap policy) that every live worker of the case fires
 * every round, at once (pods racing for the same tick), with the case's faults at the firing's pause
 * points (`schedule.fire`: a firer frozen between reading the schedule and firing it, or before reading
 * the answer). Each run a tick starts is a run of the case, driven, checked and replay-checked like the
 * others. Once two ticks fired (or four seconds passed) the schedule is removed.
 */
import { INestApplication } from '@nestjs/common';
import { DurableSchedules } from '../../src';
import { ScheduleRunner } from '../../src/maintenance/schedule-runner.service';
import type { TestSchema } from '../helpers/database';
import type { Case, Program } from './program';

export const MODEL_SCHEDULE = 'model-cron';
const KEY_PREFIX = `cron:${MODEL_SCHEDULE}:`;
/** The ticks a case lets fire before it removes its schedule, and how long it waits for them at most. */
const TICKS = 2;
const WINDOW_MS = 4000;
const TERMINAL_EVENTS = ['run.succeeded', 'run.failed', 'run.cancelled', 'run.dead_lettered'];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms).unref());

export class ScheduledStart {
  private readonly firing = new Set<Promise<unknown>>();
  private createdAt = 0;
  private removed = false;
  private schedules?: DurableSchedules;
  /** Schedule runs seen, by id. */
  private readonly seen = new Set<string>();

  /** `cc`: the case as the harness drives it (a run per tick is added to its programs and actions). */
  constructor(
    private readonly cc: Case,
    private readonly runIds: string[],
    private readonly db: TestSchema,
    private readonly kind: string,
  ) {}

  get overlap(): 'allow' | 'skip' | 'queue' {
    return this.cc.scheduled!.overlap;
  }

  /** Creates the schedule; fires until its first run exists, which becomes run #0. */
  async begin(app: INestApplication, apps: () => INestApplication[]): Promise<void> {
    this.schedules = app.get(DurableSchedules);
    await this.schedules.create(MODEL_SCHEDULE, this.kind, '* * * * * *', {
      input: this.cc.programs[0] as unknown as Record<string, unknown>,
      catchUp: 'all',
      overlap: this.overlap,
    });
    this.createdAt = Date.now();
    for (let i = 0; i < 200; i++) {
      this.fire(apps());
      const [first] = await this.scheduledRuns();
      if (first) {
        this.seen.add(first.id);
        this.runIds.push(first.id);
        return;
      }
      await sleep(25);
    }
    throw new Error('the schedule fired no run within 5 s');
  }

  /** Every firer fires once, not awaited (a frozen one must not stop the round). */
  fire(apps: INestApplication[]): void {
    if (this.removed) return;
    for (const app of apps) {
      const p = app
        .get(ScheduleRunner)
        .tick()
        .catch(() => 0);
      this.firing.add(p);
      void p.finally(() => this.firing.delete(p));
    }
  }

  /** Runs the schedule started since the last look join the case (program #0, its signals copied). */
  async adopt(): Promise<void> {
    for (const r of await this.scheduledRuns()) {
      if (this.seen.has(r.id)) continue;
      this.seen.add(r.id);
      const at = this.runIds.push(r.id) - 1;
      this.cc.programs.push(this.cc.programs[0] as Program);
      for (const a of this.cc.actions.filter((x) => x.run === 0 && x.action.a === 'signal'))
        this.cc.actions.push({ ...a, run: at, moment: { at: 'round', n: 0 } });
    }
  }

  /**
   * Whether the case may rest: the schedule is removed once it fired its ticks (or its window passed),
   * and the runs it started before that are adopted first (false until then).
   */
  async ready(): Promise<boolean> {
    if (this.removed) return true;
    await this.adopt();
    if (this.seen.size < TICKS && Date.now() - this.createdAt < WINDOW_MS) return false;
    await this.schedules!.remove(MODEL_SCHEDULE);
    this.removed = true;
    await this.adopt();
    return false;
  }

  /** Waits for the firers still in flight (a released zombie's late fire). */
  async settle(): Promise<void> {
    await Promise.race([Promise.all([...this.firing]), sleep(3000)]);
  }

  /**
   * The schedule's invariants, from the database: every run it started is one of the case's (none
   * after it was removed); one run per tick, its key and input naming the tick; with catch-up `all`
   * and overlap `allow` or `queue`, no tick between the first and the last is missing; with overlap
   * `skip` or `queue`, a tick's run was created only after the previous run ended (event ids).
   */
  async violations(): Promise<string[]> {
    const out: string[] = [];
    const runs = await this.scheduledRuns();
    for (const r of runs) {
      if (!this.runIds.includes(r.id))
        out.push(`schedule: run ${r.id} (${r.key}) was started after the schedule was removed`);
      if (r.key !== `${KEY_PREFIX}${r.at}`)
        out.push(`schedule: run ${r.id} has key ${r.key} but input.scheduledAt ${r.at}`);
    }
    const created = await this.db.query(
      `select run_id, count(*)::int as n, min(id)::bigint as id from ai_events
        where event_type = 'run.created' and run_id = any($1) group by run_id`,
      [runs.map((r) => r.id)],
    );
    for (const c of created)
      if (c.n !== 1) out.push(`schedule: run ${c.run_id} has ${c.n} run.created events`);
    const ticks = runs.map((r) => new Date(r.at).getTime());
    if (this.overlap !== 'skip')
      for (let i = 1; i < ticks.length; i++)
        if (ticks[i] - ticks[i - 1] !== 1000)
          out.push(
            `schedule: ticks ${runs[i - 1].at} and ${runs[i].at} are not consecutive (overlap ${this.overlap}, catch-up all)`,
          );
    if (this.overlap !== 'allow')
      for (let i = 1; i < runs.length; i++) {
        const [ended] = await this.db.query(
          `select min(id)::bigint as id from ai_events where run_id = $1 and event_type = any($2)`,
          [runs[i - 1].id, TERMINAL_EVENTS],
        );
        const next = created.find((c: { run_id: string }) => c.run_id === runs[i].id);
        if (!ended?.id || (next && BigInt(next.id) < BigInt(ended.id)))
          out.push(
            `schedule: run ${runs[i].id} (tick ${runs[i].at}) was created while run ${runs[i - 1].id} had not ended (overlap ${this.overlap})`,
          );
      }
    return out;
  }

  private async scheduledRuns(): Promise<Array<{ id: string; key: string; at: string }>> {
    return this.db.query(
      `select id, idempotency_key as key, input->>'scheduledAt' as at from ai_runs
        where idempotency_key like $1 order by idempotency_key`,
      [`${KEY_PREFIX}%`],
    );
  }
}
