import { INestApplication } from '@nestjs/common';
import { DurableCron, DurableWorkflow, RunContext, RunRepository } from '../../src';
import { DurableWorker } from '../../src/engine/worker.service';
import { Reconciler } from '../../src/maintenance/reconciler.service';
import { ScheduleRunner } from '../../src/maintenance/schedule-runner.service';
import { RECORD_FORMAT } from '../../src/store/record-format';
import { RunStateStore } from '../../src/store/run-state/run-state.store';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil } from '../helpers/drive';
import { waitFor } from '../helpers/processes';

@DurableWorkflow('rf-job')
class Job {
  async run(input: { n: number }) {
    return input.n;
  }
}

@DurableWorkflow('rf-parent')
class Parent {
  async run(_input: unknown, ctx: RunContext) {
    return ctx.child(Job, { n: 7 });
  }
}

@DurableWorkflow('rf-turns')
class Turns {
  async run(input: { turn: number }, ctx: RunContext) {
    return input.turn === 0 ? ctx.continueAsNew({ turn: 1 }) : input.turn;
  }
}

@DurableWorkflow('rf-digest', { debounce: { periodMs: 600_000, key: () => 'one' } })
class Digest {
  async run() {
    return 'digest';
  }
}

@DurableCron('* * * * * *', { name: 'rf-every-second' })
@DurableWorkflow('rf-cron')
class Cron {
  async run() {
    return 'tick';
  }
}

/**
 * Issue 48, part 2: `ai_runs.record_format` keeps a release's workers off runs whose records they
 * cannot replay. This release writes RECORD_FORMAT on every run it creates or starts anew, and its
 * claims (plain and limited) take no run of a later format.
 */
describe('record format: the claim filter a later release relies on', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let runs: RunRepository;
  let worker: DurableWorker;

  beforeAll(async () => {
    db = await createTestDatabase('record_format');
    app = await bootApp(db.url, [Job, Parent, Turns, Digest, Cron], {
      limits: { minScheduleIntervalMs: 1000 },
    });
    runs = app.get(RunRepository);
    worker = app.get(DurableWorker);
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  const formatOf = async (id: string): Promise<number> =>
    (await db.query(`select record_format from ai_runs where id = $1`, [id]))[0].record_format;

  it('every start, debounced start, child start, schedule fire and continue-as-new writes this release’s format', async () => {
    // A statement that does not name the column would take this default, not RECORD_FORMAT.
    await db.query(`alter table ai_runs alter column record_format set default 0`);
    try {
      const started = (await runs.start(Job, { n: 1 })).run.id;
      const debounced = (await runs.start(Digest, {})).run.id;
      const parent = (await runs.start(Parent, {})).run.id;
      expect((await driveUntil(app, db, parent)).status).toBe('succeeded');
      const [child] = await db.query(`select id from ai_runs where parent_id = $1`, [parent]);
      const turns = (await runs.start(Turns, { turn: 0 })).run.id;
      await db.query(`update ai_runs set record_format = 0 where id = $1`, [turns]); // written before
      expect((await driveUntil(app, db, turns)).status).toBe('succeeded');
      expect((await runs.get(turns))!.generation).toBe(1);
      const runner = app.get(ScheduleRunner);
      await waitFor(
        async () => {
          await runner.tick();
          return (await db.query(`select 1 from ai_runs where kind = 'rf-cron'`)).length > 0;
        },
        5000,
        'the schedule to fire',
      );
      const [fired] = await db.query(`select id from ai_runs where kind = 'rf-cron' limit 1`);
      for (const id of [started, debounced, parent, child.id, turns, fired.id])
        expect(await formatOf(id)).toBe(RECORD_FORMAT);
    } finally {
      await db.query(`alter table ai_runs alter column record_format set default 1`);
    }
  });

  it('a run of a later format is never claimed, by a worker or a limited claim; the same run at this format is', async () => {
    const later = RECORD_FORMAT + 1;
    const normal = (await runs.start(Job, { n: 2 })).run.id;
    const ahead = (await runs.start(Job, { n: 3 })).run.id;
    await db.query(`update ai_runs set record_format = $2 where id = $1`, [ahead, later]);
    for (let i = 0; i < 3; i++) {
      await worker.tick();
      await worker.idle();
      await app.get(Reconciler).sweep();
    }
    expect((await runs.get(normal))!.status).toBe('succeeded');
    expect(await runs.get(ahead)).toMatchObject({ status: 'pending', epoch: 0, attempts: 0 });

    // Both claim statements, directly: of two due runs of a kind no worker here serves, the later one stays.
    const store = app.get(RunStateStore);
    for (const limited of [false, true]) {
      const [mine] = await db.query(
        `insert into ai_runs (kind, input) values ('rf-probe', '{}') returning id`,
      );
      const [theirs] = await db.query(
        `insert into ai_runs (kind, input, record_format) values ('rf-probe', '{}', $1) returning id`,
        [later],
      );
      const claimed = await store.claim('probe', ['rf-probe'], 10, [], limited);
      expect(claimed.runs.map((r) => r.id)).toEqual([mine.id]);
      expect((await db.query(`select status from ai_runs where id = $1`, [theirs.id]))[0].status).toBe(
        'pending',
      );
      await db.query(`delete from ai_runs where kind = 'rf-probe'`);
    }

    // Back at this release's format, the run is claimed at once: the format was what kept it.
    await db.query(`update ai_runs set record_format = $2 where id = $1`, [ahead, RECORD_FORMAT]);
    expect((await driveUntil(app, db, ahead)).status).toBe('succeeded');
  });
});
