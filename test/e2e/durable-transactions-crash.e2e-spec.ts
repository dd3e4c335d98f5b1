import path from 'node:path';
import { runDurableMigrations } from '../../src/migrations';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { spawnWorker, waitFor, WorkerProcess } from '../helpers/processes';

/**
 * `@DurableTransaction` with real processes (issue 44): a worker frozen (SIGSTOP) inside a durable
 * transaction's body, before its statement or between it and the commit, past its lease, while another
 * worker takes the run over and commits; a worker killed (SIGKILL) at each crash point; a transaction
 * that runs twice the lease. The app's table (`tx_accounts.activations`) must count each run once.
 */
const FIXTURE = path.join(__dirname, '..', 'fixtures', 'tx-worker-app.ts');
const TRIALS = 5;
const LEASE = { LEASE_TTL_MS: '1500', HEARTBEAT_MS: '400' };
/** How long worker A's bodies wait inside their transaction (before the statement or the commit). */
const FROZEN_BODY_MS = 3000;

type Client = 'typeorm' | 'pg';
type At = 'before-sql' | 'before-commit';

describe('durable transactions: frozen and killed workers', () => {
  let db: TestDatabase;
  /** The app's tables in a database of their own (`@DurableTransaction({ dataSource: 'app' })`). */
  let appDb: TestDatabase;
  const workers: WorkerProcess[] = [];

  beforeEach(async () => {
    db = await createTestDatabase('durable_tx_crash');
    appDb = await createTestDatabase('durable_tx_crash_app');
    await runDurableMigrations({ type: 'postgres', url: db.url });
    for (const d of [db, appDb])
      await d.query(`create table tx_accounts (id text primary key, activations int not null default 0)`);
  });
  afterEach(async () => {
    for (const w of workers.splice(0)) {
      w.child.kill('SIGCONT');
      w.child.kill('SIGKILL');
      await w.exited;
    }
    await db.drop();
    await appDb.drop();
  });

  const start = (env: Record<string, string>) => {
    const w = spawnWorker({ DB_URL: db.url, APP_DB_URL: appDb.url, ...LEASE, ...env }, FIXTURE);
    workers.push(w);
    return w;
  };

  /** `n` runs of `txz`, each with an account row of its own (`<prefix>-<i>`), in the database it writes. */
  async function startRuns(prefix: string, n: number, client: Client, at: At, other: boolean): Promise<void> {
    await (other ? appDb : db).query(
      `insert into tx_accounts (id) select $1 || '-' || i from generate_series(1, $2) i`,
      [prefix, n],
    );
    await db.query(
      `insert into ai_runs (kind, input)
       select 'txz', jsonb_build_object('id', $1 || '-' || i, 'client', $3::text, 'at', $4::text, 'other', $5::boolean)
         from generate_series(1, $2) i`,
      [prefix, n, client, at, other],
    );
  }

  const activations = async (prefix: string, other: boolean) =>
    (
      await (other ? appDb : db).query(
        `select activations from tx_accounts where id like $1 || '-%' order by id`,
        [prefix],
      )
    ).map((r) => r.activations as number);
  const succeeded = async () =>
    (await db.query(`select count(*)::int as n from ai_runs where status = 'succeeded'`))[0].n as number;

  const frozen: Array<[Client, At, boolean]> = [
    ['typeorm', 'before-sql', false],
    ['typeorm', 'before-commit', false],
    ['pg', 'before-sql', false],
    ['pg', 'before-commit', false],
    ['typeorm', 'before-commit', true],
    ['pg', 'before-sql', true],
  ];
  const where = (at: At) =>
    at === 'before-sql' ? 'before its statement' : 'between its statement and the commit';
  for (const [client, at, other] of frozen)
    it(`${other ? 'another database, ' : ''}${client}, frozen ${where(at)}: each row once`, async () => {
      // A's bodies wait FROZEN_BODY_MS in the transaction, past the moment the last of them says it is
      // in its body: on a loaded machine the five reached it up to a second apart, and with 1 s the first
      // committed before the freeze (B then took over 4 runs, not 5: the premise below failed).
      const a = start({ PRE_MS: String(FROZEN_BODY_MS) });
      await a.ready;
      let inBody = 0;
      a.child.on('message', (m: { at?: string }) => {
        if (m.at === 'in-body') inBody++;
      });
      await startRuns('z', TRIALS, client, at, other);
      await waitFor(async () => inBody >= TRIALS, 20_000, `${TRIALS} bodies of worker A`);
      a.child.kill('SIGSTOP');
      const b = start({ PRE_MS: '100' });
      await b.ready;
      await waitFor(async () => (await succeeded()) === TRIALS, 60_000, 'worker B to finish every run');
      a.child.kill('SIGCONT'); // A's bodies go on: their statements and commits must change nothing
      await new Promise((r) => setTimeout(r, FROZEN_BODY_MS + 500));
      expect(await activations('z', other)).toEqual(Array(TRIALS).fill(1));
      const taken = await db.query(
        `select count(*)::int as n from ai_events where event_type = 'run.claimed' and epoch >= 2`,
      );
      expect(taken[0].n).toBeGreaterThanOrEqual(TRIALS); // every run was taken over (the premise)
      const cps = await db.query(
        `select count(*)::int as n, count(distinct run_id)::int as runs from ai_checkpoints where step_name like 'activate%'`,
      );
      expect(cps[0]).toEqual({ n: TRIALS, runs: TRIALS });
      if (other) {
        // Every completion row there is a new owner's: the frozen claim committed nothing there.
        const rows = await appDb.query(
          `select count(*)::int as n from durable_transactions where epoch >= 2`,
        );
        expect(rows[0].n).toBe(TRIALS);
      }
    }, 120_000);

  const points = ['before-transaction-sql', 'before-transaction-commit', 'after-transaction-commit'];
  const kills: Array<[string, boolean]> = [
    ...points.map((p): [string, boolean] => [p, false]),
    [points[2], true],
  ];
  for (const [point, other] of kills)
    it(`${other ? 'another database, ' : ''}SIGKILL at ${point}: the row is written once, none missing`, async () => {
      await startRuns('k', 1, 'pg', 'before-commit', other);
      const a = start({ PRE_MS: '10', DURABLE_CRASH_AT: point });
      const exit = await a.exited;
      expect(exit.signal).toBe('SIGKILL');
      expect(await activations('k', other)).toEqual([point === 'after-transaction-commit' ? 1 : 0]);
      const b = start({ PRE_MS: '10' });
      await b.ready;
      await waitFor(async () => (await succeeded()) === 1, 30_000, 'the run to succeed on worker B');
      expect(await activations('k', other)).toEqual([1]);
    }, 60_000);

  it("a transaction that runs twice the lease keeps its own and the worker's other leases", async () => {
    const a = start({ LONG_MS: '3200', CONCURRENCY: '4' });
    await a.ready;
    await db.query(
      `insert into ai_runs (kind, input) values ('txlong', '{}'), ('txstep', '{}'), ('txstep', '{}'), ('txstep', '{}')`,
    );
    await waitFor(async () => (await succeeded()) === 4, 30_000, 'the four runs to succeed');
    // No run was ever claimed twice: no lease lapsed while the transaction held its connection.
    const claims = await db.query(`select max(epoch)::int as e from ai_runs`);
    expect(claims[0].e).toBe(1);
    const out = await db.query(`select output from ai_runs where kind = 'txlong'`);
    expect(out[0].output).toBe('long done');
  }, 60_000);
});
