/**
 * Issue 47 part 1: a step commit writes its `run.checkpoint_saved` event in its checkpoint row (an id
 * from the events' sequence), no event row beside it. The trail users read (RunRepository.events, its
 * pages, the admin API) is unchanged: every event once, in id order; a worker of the previous release,
 * which writes an event row and a checkpoint without an event, shows its step once (mixed fleet).
 * The migration gives every role that may insert events USAGE on the sequence (a step calls nextval).
 */
import { randomUUID } from 'node:crypto';
import { INestApplication, Injectable } from '@nestjs/common';
import { DurableStep, DurableWorkflow, RunContext, RunEvent, RunRepository } from '../../src';
import { CheckpointEvents1766999500000 } from '../../migrations';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { tickUntilStatus } from '../helpers/drive';
import type { QueryRunner } from 'typeorm';

@Injectable()
class Steps {
  @DurableStep({ name: 'fetch' })
  async fetch(i: number) {
    return { i };
  }
}

@DurableWorkflow('cpev-three')
class ThreeSteps {
  constructor(private readonly steps: Steps) {}
  async run(_input: unknown, ctx: RunContext) {
    const out: number[] = [];
    for (let i = 0; i < 3; i++) out.push((await this.steps.fetch(i)).i);
    await ctx.sleep(1500); // parks once: the trail goes on after a resume
    out.push((await this.steps.fetch(3)).i);
    return out;
  }
}

describe('checkpoint events: a step commit writes no event row, the trail is unchanged', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let runs: RunRepository;

  beforeAll(async () => {
    db = await createTestDatabase('cpev');
    app = await bootApp(db.url, [Steps, ThreeSteps]);
    runs = app.get(RunRepository);
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  // The sleep is due by its recorded time, which a due-now update of the row does not move: ticked
  // until it fired (driveUntil's 50 ticks took less than its 1.5 s on a quiet machine).
  const finished = (id: string) => tickUntilStatus(app, id, 'succeeded', `run ${id} succeeded`, 20_000);

  const types = (events: RunEvent[]) =>
    events.map((e) => `${e.type}${e.type === 'run.checkpoint_saved' ? `:${e.payload.step}` : ''}`);

  it('each step event lives in its checkpoint row; events() and its pages read them in order, once', async () => {
    const { run } = await runs.start('cpev-three', {});
    await finished(run.id);

    // No event row for a step; each user step's checkpoint carries its event and an id.
    expect(
      await db.query(
        `select count(*)::int as n from ai_events where run_id = $1 and event_type = 'run.checkpoint_saved'`,
        [run.id],
      ),
    ).toEqual([{ n: 0 }]);
    const saved = await db.query(
      `select step_index, event_id, event from ai_checkpoints where run_id = $1 and step_name = 'fetch' order by step_index`,
      [run.id],
    );
    expect(saved.map((c) => c.event)).toEqual(
      [0, 1, 2, 4].map((step) => expect.objectContaining({ step, name: 'fetch' })),
    );
    expect(saved.every((c) => c.event_id !== null)).toBe(true);

    const all = await runs.events(run.id);
    const ids = all.map((e) => e.id);
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    expect(new Set(ids).size).toBe(ids.length);
    const trail = types(all);
    // Each step's event before what follows it, the run's end last.
    expect(trail.filter((t) => t.startsWith('run.checkpoint_saved'))).toEqual(
      [0, 1, 2, 4].map((s) => `run.checkpoint_saved:${s}`),
    );
    expect(trail.slice(0, 6)).toEqual([
      'run.created',
      'run.claimed',
      'run.checkpoint_saved:0',
      'run.checkpoint_saved:1',
      'run.checkpoint_saved:2',
      'run.sleeping',
    ]);
    expect(trail.slice(-3)).toEqual(['run.claimed', 'run.checkpoint_saved:4', 'run.succeeded']);
    const saved2 = all.find((e) => e.type === 'run.checkpoint_saved' && e.payload.step === 2)!;
    expect(saved2).toMatchObject({
      runId: run.id,
      epoch: 1,
      payload: { step: 2, name: 'fetch', kind: 'compute' },
    });
    expect(saved2.createdAt).toBeInstanceOf(Date);

    // Pages of 2, oldest first and newest first, give the same trail.
    const forward: RunEvent[] = [];
    for (let after: number | undefined; ;) {
      const page = await runs.events(run.id, { after, limit: 2 });
      if (!page.length) break;
      forward.push(...page);
      after = page[page.length - 1].id;
    }
    expect(forward.map((e) => e.id)).toEqual(ids);
    const backward: RunEvent[] = [];
    for (let before: number | undefined; ;) {
      const page = await runs.events(run.id, { before, newestFirst: true, limit: 2 });
      if (!page.length) break;
      backward.push(...page);
      before = page[page.length - 1].id;
    }
    expect(backward.map((e) => e.id)).toEqual([...ids].reverse());
  });

  it("a previous release's step (an event row, a checkpoint without one) is in the trail once", async () => {
    const { run } = await runs.start('cpev-three', {});
    await finished(run.id);
    // As a 0.3.0 worker writes a step: the checkpoint without event_id, the event as a row.
    await db.query(
      `with cp as (
         insert into ai_checkpoints (run_id, step_index, step_name, output, attempt, epoch)
         values ($1, 9, 'old-worker', '1', 1, 1)
       )
       insert into ai_events (run_id, event_type, epoch, payload)
       values ($1, 'run.checkpoint_saved', 1, '{"step":9,"name":"old-worker","kind":"tool"}')`,
      [run.id],
    );
    const steps = (await runs.events(run.id)).filter((e) => e.type === 'run.checkpoint_saved');
    expect(steps.map((e) => e.payload.step)).toEqual([0, 1, 2, 4, 9]);
  });

  it('the migration lets every role that may insert events draw ids from the sequence', async () => {
    const role = `cpev_${randomUUID().slice(0, 8)}`;
    await db.query(`create role ${role}`);
    try {
      const migration = new CheckpointEvents1766999500000();
      const q = { query: (sql: string) => db.query(sql) } as unknown as QueryRunner;
      await migration.down(q);
      await db.query(`grant insert on ai_events to ${role}`);
      const usage = `select has_sequence_privilege('${role}', 'ai_events_id_seq', 'USAGE') as ok`;
      expect(await db.query(usage)).toEqual([{ ok: false }]);
      await migration.up(q);
      expect(await db.query(usage)).toEqual([{ ok: true }]);
    } finally {
      await db.query(`drop owned by ${role}`);
      await db.query(`drop role ${role}`);
    }
  });
});
