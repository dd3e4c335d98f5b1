import { Client } from 'pg';
import { spawnWorker, waitFor, WorkerProcess } from '../helpers/processes';
import { prepareWorkerSchema } from '../helpers/schema';
import { startOwnedPostgres } from '../helpers/owned-postgres';

async function q(url: string, sql: string, params: unknown[] = []): Promise<any[]> {
  const c = new Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query(sql, params)).rows;
  } finally {
    await c.end();
  }
}

describe('PostgreSQL restart mid-flight', () => {
  it('100 runs on 2 workers all finish, none lost, while the server restarts', async () => {
    const pg = await startOwnedPostgres();
    const workers: WorkerProcess[] = [];
    try {
      await prepareWorkerSchema(pg.url);
      await q(pg.url, `insert into ai_runs (kind, input) select 'po9', '{}' from generate_series(1, 100)`);
      for (let i = 0; i < 2; i++)
        workers.push(spawnWorker({ DB_URL: pg.url, STEP_DELAY_MS: '20', CONCURRENCY: '10' }));
      await Promise.all(workers.map((w) => w.ready));
      await waitFor(
        async () =>
          (await q(pg.url, `select count(*)::int as n from ai_runs where status = 'succeeded'`))[0].n >= 10,
        60_000,
        'some runs to finish before the restart',
      );
      await pg.stop();
      await new Promise((r) => setTimeout(r, 1000));
      await pg.start();
      await waitFor(
        async () => {
          const rows = await q(
            pg.url,
            `select count(*)::int as n from ai_runs where status = 'succeeded'`,
          ).catch(() => [{ n: 0 }]);
          return rows[0].n === 100;
        },
        60_000,
        'all 100 runs to succeed after the restart',
      ).catch(async (err) => {
        for (const w of workers) console.log('worker', w.child.pid, w.child.exitCode, w.child.signalCode);
        console.log(
          await q(
            pg.url,
            `select status, count(*)::int, min(lease_expires_at) as lease, min(available_at) as avail from ai_runs group by 1`,
          ),
        );
        console.log(
          await q(
            pg.url,
            `select event_type, count(*)::int from ai_events where created_at > now() - interval '40 seconds' group by 1`,
          ),
        );
        throw err;
      });
      for (const w of workers) expect(w.child.exitCode).toBeNull(); // no worker crashed
      const [{ n }] = await q(pg.url, `select count(*)::int as n from ai_checkpoints`);
      expect(n).toBe(100 * 11);
      // Every run has an effect of each of its nine steps. A step whose commit was cut by the restart
      // ran again after the resume (steps are at-least-once; exactly-once effects are commands' job).
      const incomplete = await q(
        pg.url,
        `select r.id from ai_runs r left join step_effects e on e.run_id = r.id
          group by r.id having count(distinct e.step) <> 9`,
      );
      expect(incomplete).toEqual([]);
      const [{ extra }] = await q(pg.url, `select count(*)::int - 900 as extra from step_effects`);
      console.log(
        `PostgreSQL restart: 100/100 runs succeeded; ${extra} step executions repeated after cut commits`,
      );
    } finally {
      for (const w of workers) {
        w.child.kill('SIGKILL');
        await w.exited;
      }
      await pg.dispose();
    }
  }, 180_000);
});
