import { INestApplication, Injectable } from '@nestjs/common';
import { DurableStep, DurableWorkflow, RunContext, RunRepository } from '../../src';
import { DurableWorker } from '../../src/engine/worker.service';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { waitFor } from '../helpers/processes';

/**
 * A run parked by `ctx.sleep` under the code before the wait board (issue 35 B) holds one record: a
 * `$sleep` checkpoint at the sleep's position whose value is the due time, written by the park, with
 * the run `waiting` until then. The wait board records a sleep's due time at a position of its own
 * (`$due`) and its firing as `$sleep`; a `$sleep` without `$due` must still read as that old park:
 * over once its recorded time passed, else waited for until that time (not for `ms` again).
 */
@Injectable()
class After {
  @DurableStep({ name: 'after-sleep' })
  async after() {
    return 'woke';
  }
}

@DurableWorkflow('legacy-sleep')
class LegacySleep {
  constructor(private readonly after: After) {}
  async run(input: { ms: number }, ctx: RunContext) {
    await ctx.sleep(input.ms);
    return this.after.after();
  }
}

describe('a sleep parked by the code before the wait board resumes (issue 35 B)', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let runs: RunRepository;
  let worker: DurableWorker;

  beforeAll(async () => {
    db = await createTestDatabase('legacy_sleep');
    app = await bootApp(db.url, [After, LegacySleep]);
    runs = app.get(RunRepository);
    worker = app.get(DurableWorker);
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  /** A run as the old code left it: parked on its sleep at position 0 until `dueInMs` from now. */
  async function parkedTheOldWay(dueInMs: number, claimableNow = false): Promise<string> {
    const { run } = await runs.start(LegacySleep, { ms: 3_600_000 });
    await db.query(
      `with due as (select now() + make_interval(secs => $2::float8 / 1000) as at)
       , cp as (insert into ai_checkpoints (run_id, step_index, step_name, output, epoch)
                select $1, 0, '$sleep', to_jsonb(to_char(at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')), 1 from due)
       update ai_runs set status = 'waiting', epoch = 1, parked_reason = 'sleeping', available_at = case when $3 then now() else (select at from due) end
        where id = $1`,
      [run.id, dueInMs, claimableNow],
    );
    return run.id;
  }

  async function drive(id: string, withinMs: number) {
    await waitFor(
      async () => {
        await worker.tick();
        await worker.idle();
        return (await runs.get(id))!.status === 'succeeded';
      },
      withinMs,
      `run ${id} to succeed`,
    );
    return (await runs.get(id))!;
  }

  const positions = (id: string) =>
    db.query<{ step_index: number; step_name: string }>(
      `select step_index, step_name from ai_checkpoints where run_id = $1 order by step_index`,
      [id],
    );

  it('its time passed: the sleep is over at once, and nothing is recorded for it again', async () => {
    const id = await parkedTheOldWay(-1000);
    const done = await drive(id, 5000);
    expect(done.output).toBe('woke');
    const rows = await positions(id);
    expect(rows.map((r) => r.step_name)).toEqual(['$sleep', 'after-sleep']);
  });

  it("its time still to come: the run waits until that time, not for the sleep's ms again", async () => {
    const started = Date.now();
    const id = await parkedTheOldWay(1500);
    // Before its time nothing claims it.
    await worker.tick();
    await worker.idle();
    expect((await runs.get(id))!.status).toBe('waiting');
    const done = await drive(id, 10_000);
    expect(done.output).toBe('woke');
    expect(Date.now() - started).toBeGreaterThanOrEqual(1400);
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it('claimed before its time (a wake): it waits on for the rest of that time, then goes on', async () => {
    const started = Date.now();
    const id = await parkedTheOldWay(1500, true);
    const done = await drive(id, 10_000);
    expect(done.output).toBe('woke');
    expect(Date.now() - started).toBeGreaterThanOrEqual(1400);
  });
});
