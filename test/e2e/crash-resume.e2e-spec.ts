import { createTestDatabase, TestDatabase } from '../helpers/database';
import { spawnWorker, waitFor } from '../helpers/processes';
import { prepareWorkerSchema } from '../helpers/schema';

const STEPS = [
  'parse_request',
  'resolve_supplier',
  'quote',
  'credit_check',
  'charge_card',
  'book_shipment',
  'notify_buyer',
  'notify_supplier',
  'finalize',
];

describe('crash and resume across OS processes', () => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase('crash');
    await prepareWorkerSchema(db.url);
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('SIGKILL right after each step commit in turn: the run resumes elsewhere and no committed step runs again', async () => {
    const [{ id }] = await db.query(`insert into ai_runs (kind, input) values ('po9', '{}') returning id`);
    // Index 0 and 1 are ctx.uuid() and ctx.now(); the nine steps are indexes 2..10.
    for (let k = 2; k <= 10; k++) {
      const w = spawnWorker({ DB_URL: db.url, DURABLE_CRASH_AT: `after-step-commit@${k}` });
      const exit = await w.exited;
      expect(exit.signal).toBe('SIGKILL');
      const [cp] = await db.query(`select max(step_index) as last from ai_checkpoints where run_id = $1`, [
        id,
      ]);
      expect(cp.last).toBe(k);
      const [row] = await db.query(`select status from ai_runs where id = $1`, [id]);
      expect(row.status).toBe('running'); // the dead worker still "holds" it until its lease expires
    }
    const final = spawnWorker({ DB_URL: db.url });
    await waitFor(
      async () =>
        (await db.query(`select status from ai_runs where id = $1`, [id]))[0].status === 'succeeded',
      30_000,
      'the run to succeed after nine crashes',
    );
    final.child.kill('SIGTERM');
    await final.exited;

    const effects = await db.query(
      `select step, ref, at, pid from step_effects where run_id = $1 order by id`,
      [id],
    );
    expect(effects.map((e) => e.step)).toEqual(STEPS); // each step exactly once, in order
    expect(new Set(effects.map((e) => e.pid)).size).toBe(9); // ...each by a different process
    expect(new Set(effects.map((e) => e.ref)).size).toBe(1); // ctx.uuid() survived every crash
    expect(new Set(effects.map((e) => e.at)).size).toBe(1); // ctx.now() too
    const [run] = await db.query(`select output, epoch from ai_runs where id = $1`, [id]);
    expect(run.output).toEqual({ ref: effects[0].ref, at: effects[0].at });
    expect(Number(run.epoch)).toBe(10);
    const events = await db.query(`select event_type, epoch from ai_events where run_id = $1 order by id`, [
      id,
    ]);
    expect(events.filter((e) => e.event_type === 'run.reconciled')).toHaveLength(9);
    const epochs = events.map((e) => Number(e.epoch));
    expect(epochs).toEqual([...epochs].sort((a, b) => a - b)); // epochs only rise along the trail
  }, 240_000);
});
