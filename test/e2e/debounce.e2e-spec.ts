import { INestApplication } from '@nestjs/common';
import { DurableWorkflow, RunRepository } from '../../src';
import { InvalidArgumentError } from '../../src/errors/invalid-argument.error';
import { DurableWorker } from '../../src/engine/worker.service';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { waitFor } from '../helpers/processes';

@DurableWorkflow('digest', { debounce: { periodMs: 400, key: (i: { user: string }) => i.user } })
class Digest {
  async run(input: { user: string; n: number }) {
    return input;
  }
}

/** Debounced starts: a burst of starts for a key becomes one run, with the last input. */
describe('debounce', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let runs: RunRepository;
  let worker: DurableWorker;

  beforeAll(async () => {
    db = await createTestDatabase('debounce');
    app = await bootApp(db.url, [Digest]);
    runs = app.get(RunRepository);
    worker = app.get(DurableWorker);
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  const runsOf = async (user: string) =>
    db.query(`select id, status, input, epoch from ai_runs where kind = 'digest' and input->>'user' = $1`, [
      user,
    ]);

  it('a burst becomes one run per key, begun after a quiet period, with the last input', async () => {
    const a = [];
    for (let n = 1; n <= 5; n++) a.push(await runs.start('digest', { user: 'ann', n }));
    await runs.start('digest', { user: 'bob', n: 1 });
    expect(a.map((s) => s.created)).toEqual([true, false, false, false, false]);
    expect(new Set(a.map((s) => s.run.id)).size).toBe(1);
    expect(await runsOf('ann')).toHaveLength(1);
    await worker.tick(); // not due before the quiet period
    expect((await runsOf('ann'))[0].status).toBe('pending');
    await waitFor(
      async () => {
        await worker.tick();
        await worker.idle();
        return (
          (await runsOf('ann'))[0].status === 'succeeded' && (await runsOf('bob'))[0].status === 'succeeded'
        );
      },
      5000,
      'both runs to begin and finish',
    );
    expect((await runs.get(a[0].run.id))!.output).toEqual({ user: 'ann', n: 5 });
    const trail = await db.query(`select event_type from ai_events where run_id = $1 order by id`, [
      a[0].run.id,
    ]);
    expect(trail.map((e: any) => e.event_type).slice(0, 5)).toEqual([
      'run.created',
      'run.debounced',
      'run.debounced',
      'run.debounced',
      'run.debounced',
    ]);
    // A start after the run began is a new burst.
    const later = await runs.start('digest', { user: 'ann', n: 6 });
    expect(later.created).toBe(true);
    expect(await runsOf('ann')).toHaveLength(2);
  });

  it('concurrent starts of one key make one run', async () => {
    const starts = await Promise.all(
      Array.from({ length: 20 }, (_, n) => runs.start('digest', { user: 'cat', n })),
    );
    expect(starts.filter((s) => s.created)).toHaveLength(1);
    expect(await runsOf('cat')).toHaveLength(1);
  });

  it('a start racing the claim of its due run never changes the input of a run that began', async () => {
    for (let i = 0; i < 8; i++) {
      const user = `race${i}`;
      await runs.start('digest', { user, n: 1 });
      await new Promise((r) => setTimeout(r, 410 + (i % 4) * 5)); // due now, or nearly
      const [, second] = await Promise.all([worker.tick(), runs.start('digest', { user, n: 2 })]);
      await waitFor(
        async () => {
          await worker.tick();
          await worker.idle();
          return (await runsOf(user)).every((r: any) => r.status === 'succeeded');
        },
        5000,
        `runs of ${user} to finish`,
      );
      // Whoever won, the run that began carries the input it began with, and no start's input is lost.
      const outputs = (await runsOf(user)).map((r: any) => r.input.n).sort();
      expect(outputs).toEqual(second.created ? [1, 2] : [2]);
      expect((await runs.get(second.run.id))!.output).toEqual({ user, n: 2 });
    }
  });

  it('refuses an idempotency key or a runAt, naming the field', async () => {
    await expect(runs.start('digest', { user: 'dan', n: 1 }, { idempotencyKey: 'k' })).rejects.toThrow(
      InvalidArgumentError,
    );
    await expect(runs.start('digest', { user: 'dan', n: 1 }, { runAt: new Date() })).rejects.toThrow(/runAt/);
    expect(await runsOf('dan')).toEqual([]);
    expect(() => DurableWorkflow('bad', { debounce: { periodMs: 0 } })).toThrow(/debounce.periodMs/);
  });
});
