import { mkdtempSync, readFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { spawnWorker, waitFor, WorkerProcess } from '../helpers/processes';
import { prepareWorkerSchema } from '../helpers/schema';
import { Client } from 'pg';

/**
 * Issue 21's done-when for child runs, with real processes: a parent whose worker is SIGKILLed between
 * starting a child and awaiting it has exactly one child per position, and fan-outs across 4 workers,
 * two of them SIGKILLed while parents and children run, give every parent exactly its children, each
 * started once, ended once, and the parent's result from all of them.
 */
describe('child runs across worker processes, with SIGKILLs', () => {
  let db: TestDatabase;
  let sql: Client;
  const workers: WorkerProcess[] = [];
  const N = 3; // children started one by one; two more are fanned out with ctx.child
  const SUM = ((N * (N - 1)) / 2) * 10 + 1000 + 1010;

  beforeAll(async () => {
    db = await createTestDatabase('children_procs');
    await prepareWorkerSchema(db.url);
    sql = new Client({ connectionString: db.url });
    await sql.connect();
  });
  afterAll(async () => {
    for (const w of workers) w.child.kill('SIGKILL');
    await Promise.all(workers.map((w) => w.exited));
    await sql?.end();
    await db?.drop();
  });

  const worker = (id: string, env: Record<string, string> = {}) => {
    const w = spawnWorker({ DB_URL: db.url, CHILDREN: '1', WORKER_ID: id, LEASE_TTL_MS: '1200', ...env });
    workers.push(w);
    return w;
  };
  const start = async (n: number, key: string): Promise<string> => {
    const { rows } = await sql.query(
      `insert into ai_runs (kind, input, idempotency_key, max_attempts) values ('kids-parent', $1, $2, 20) returning id`,
      [{ n }, key],
    );
    await sql.query(
      `insert into ai_events (run_id, event_type, epoch, payload) values ($1, 'run.created', 0, '{}')`,
      [rows[0].id],
    );
    return rows[0].id;
  };
  /** Every parent and child ended as it should; returns the per-parent facts. */
  async function settle(parents: string[]) {
    await waitFor(
      async () =>
        (
          await sql.query(
            `select count(*)::int as n from ai_runs where kind in ('kids-parent', 'kids-child') and status <> 'succeeded'`,
          )
        ).rows[0].n === 0,
      60_000,
      'every parent and child to succeed',
    );
    const { rows } = await sql.query(
      `select p.id, p.output,
              (select count(*)::int from ai_runs c where c.parent_id = p.id) as children,
              (select count(distinct c.idempotency_key)::int from ai_runs c where c.parent_id = p.id) as keys,
              (select count(*)::int from ai_events e where e.run_id = p.id and e.event_type = 'child.started') as started,
              (select count(*)::int from ai_events e where e.run_id = p.id and e.event_type = 'child.ended') as ended,
              (select count(*)::int from ai_events e where e.run_id = p.id and e.event_type = 'run.claimed') as claims
         from ai_runs p where p.id = any($1)`,
      [parents],
    );
    for (const r of rows) {
      expect(r).toMatchObject({
        output: { sum: SUM },
        children: N + 2,
        keys: N + 2,
        started: N + 2,
        ended: N + 2,
      });
    }
    return rows;
  }

  it('a parent killed between starting a child and awaiting it has exactly one child there', async () => {
    const crashLog = path.join(mkdtempSync(path.join(tmpdir(), 'kids-')), 'crash.log');
    const parent = await start(N, 'kids-crash');
    const a = worker('kids-crash-a', {
      DURABLE_CRASH_AT: 'after-child-start@1',
      DURABLE_CRASH_LOG: crashLog,
    });
    expect((await a.exited).signal).toBe('SIGKILL');
    expect(existsSync(crashLog) && readFileSync(crashLog, 'utf8')).toBe('after-child-start\n');
    const before = await sql.query(`select idempotency_key from ai_runs where parent_id = $1 order by 1`, [
      parent,
    ]);
    expect(before.rows.map((r) => r.idempotency_key)).toEqual([`child:${parent}:0`, `child:${parent}:1`]);
    worker('kids-crash-b');
    const [facts] = await settle([parent]);
    expect(facts.claims).toBeGreaterThanOrEqual(2); // the takeover replayed the recorded starts
  });

  it('fan-outs on 4 workers, 2 SIGKILLed mid-way: every parent has exactly its children', async () => {
    const parents: string[] = [];
    for (let i = 0; i < 10; i++) parents.push(await start(N, `kids-${i}`));
    const pool = [0, 1, 2, 3].map((i) => worker(`kids-w${i}`, { STEP_DELAY_MS: '150', CONCURRENCY: '3' }));
    await Promise.all(pool.map((w) => w.ready));
    await waitFor(
      async () =>
        (await sql.query(`select count(*)::int as n from ai_runs where parent_id is not null`)).rows[0].n >=
        12,
      20_000,
      'children to be started',
    );
    pool[0].child.kill('SIGKILL');
    await new Promise((r) => setTimeout(r, 400));
    pool[1].child.kill('SIGKILL');
    worker('kids-w4', { STEP_DELAY_MS: '150' });
    const rows = await settle(parents);
    const { rows: recovered } = await sql.query(
      `select count(*)::int as n from ai_events where event_type = 'run.reconciled'`,
    );
    console.log(
      `child runs across processes: ${rows.length} parents × ${N + 2} children, 2 workers SIGKILLed, ` +
        `${recovered[0].n} leases recovered, parent claims ${rows.map((r) => r.claims).join(',')}`,
    );
    expect(recovered[0].n).toBeGreaterThan(0); // the kills hit runs in flight
  });
});
