import { createTestDatabase, TestDatabase } from '../helpers/database';
import { spawnWorker, waitFor } from '../helpers/processes';
import { prepareWorkerSchema } from '../helpers/schema';
import { TRAIL } from '../helpers/event-trail';

/**
 * Issue 38: the last step's commit rides on the finish. A worker killed after the last step's body
 * returned and before that one statement committed left nothing of it: no checkpoint, no finish. The
 * run resumes elsewhere, every committed step replays, only the last step runs again (at least once,
 * as any step whose commit was lost), and the run ends with what that step and the finish wrote
 * together. (A kill right after the commit finds the run finished: there is no moment in between.)
 */
describe('a worker killed before the fused last commit (issue 38)', () => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase('fused_crash');
    await prepareWorkerSchema(db.url);
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('SIGKILL before the last step commit: nothing of it is stored, the run resumes and ends once', async () => {
    const [{ id }] = await db.query(`insert into ai_runs (kind, input) values ('po9', '{}') returning id`);
    // Index 0 and 1 are ctx.uuid() and ctx.now(); the nine steps are indexes 2..10, 10 the last.
    const w = spawnWorker({ DB_URL: db.url, DURABLE_CRASH_AT: 'before-step-commit@10' });
    expect((await w.exited).signal).toBe('SIGKILL');
    const [cp] = await db.query(`select max(step_index) as last from ai_checkpoints where run_id = $1`, [id]);
    expect(cp.last).toBe(9);
    const [held] = await db.query(`select status, output from ai_runs where id = $1`, [id]);
    expect(held).toEqual({ status: 'running', output: null });

    const final = spawnWorker({ DB_URL: db.url });
    await waitFor(
      async () =>
        (await db.query(`select status from ai_runs where id = $1`, [id]))[0].status === 'succeeded',
      30_000,
      'the run to succeed after the crash',
    );
    final.child.kill('SIGTERM');
    await final.exited;

    const effects = await db.query(`select step, ref, pid from step_effects where run_id = $1 order by id`, [
      id,
    ]);
    const steps = effects.map((e) => e.step);
    expect(steps.filter((s) => s === 'finalize')).toHaveLength(2); // its commit was lost with the process
    expect(steps.filter((s) => s !== 'finalize')).toHaveLength(8); // every committed step once
    expect(new Set(effects.map((e) => e.ref)).size).toBe(1); // ctx.uuid() survived
    const [same] = await db.query(
      `select (select xmin::text from ai_checkpoints where run_id = $1 and step_index = 10)
            = (select xmin::text from ai_runs where id = $1) as fused`,
      [id],
    );
    expect(same.fused).toBe(true); // the resumed claim fused it too
    const events = await db.query(`select event_type from ${TRAIL} t where run_id = $1 order by id`, [id]);
    const types = events.map((e) => e.event_type);
    expect(types.filter((t) => t === 'run.checkpoint_saved')).toHaveLength(9);
    expect(types.slice(-2)).toEqual(['run.checkpoint_saved', 'run.succeeded']);
  }, 120_000);
});
