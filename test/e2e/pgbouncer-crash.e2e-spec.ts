import { createTestDatabase, TestDatabase } from '../helpers/database';
import { FakeTarget, startFakeTarget } from '../helpers/fake-target';
import { spawnWorker, waitFor, WorkerProcess } from '../helpers/processes';
import { prepareWorkerSchema } from '../helpers/schema';
import { PgBouncer, pgbouncerTestsRun, startPgBouncer } from '../pgbouncer/pgbouncer';
import { PGBOUNCER_ENV } from '../pgbouncer/route';

const run = pgbouncerTestsRun() ? describe : describe.skip;

/**
 * A short crash profile with every worker's pool through PgBouncer 1.18 in transaction mode (unnamed
 * statements, LISTEN and migration lock direct): three worker processes whose 15 pooled connections
 * share four server connections, SIGKILLed at random while 60 runs (50 that charge a target that does
 * not deduplicate, 10 nine-step runs) go through. Every run must end once, every charge land once.
 */
run('crash profile through PgBouncer (transaction pooling)', () => {
  let db: TestDatabase;
  let bouncer: PgBouncer;
  let target: FakeTarget;
  const live: WorkerProcess[] = [];

  beforeAll(async () => {
    db = await createTestDatabase('pgb_crash');
    await prepareWorkerSchema(db.url);
    bouncer = await startPgBouncer(db.url, { poolSize: 4 });
    target = await startFakeTarget({ honoursKeys: false });
  });
  afterAll(async () => {
    for (const w of live.splice(0)) {
      w.child.kill('SIGKILL');
      await w.exited;
    }
    await target?.close();
    await bouncer?.stop();
    await db?.drop();
  });

  it('60 runs, workers SIGKILLed at random: each run ends once, each charge lands once', async () => {
    await db.query(
      `insert into ai_runs (kind, input) select 'charge', '{"amount": 1}' from generate_series(1, 50)`,
    );
    await db.query(`insert into ai_runs (kind, input) select 'po9', '{}' from generate_series(1, 10)`);
    const spawn = () =>
      spawnWorker({
        DB_URL: db.url,
        TARGET_URL: target.url,
        STEP_DELAY_MS: '20',
        CONCURRENCY: '4',
        [PGBOUNCER_ENV]: String(bouncer.port),
      });
    for (let i = 0; i < 3; i++) live.push(spawn());
    let kills = 0;
    let seed = 7;
    const rand = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const deadline = Date.now() + 6_000;
    while (Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 500 + rand() * 900));
      const i = Math.floor(rand() * live.length);
      live[i].child.kill('SIGKILL');
      await live[i].exited;
      kills++;
      live[i] = spawn();
    }
    await waitFor(
      async () =>
        (await db.query(`select count(*)::int as n from ai_runs where status = 'succeeded'`))[0].n === 60,
      90_000,
      'all 60 runs to succeed',
    );
    const ends = await db.query(
      `select run_id, count(*)::int as n from ai_events where event_type = 'run.succeeded' group by run_id`,
    );
    expect(ends).toHaveLength(60);
    expect(ends.filter((e) => e.n !== 1)).toEqual([]); // each run finished exactly once
    const effects = target.effects();
    const keys = await db.query(`select idempotency_key from ai_commands`);
    expect(keys).toHaveLength(50);
    expect(keys.filter((k) => effects[k.idempotency_key] !== 1)).toEqual([]);
    const steps = await db.query(
      `select r.id, count(c.*)::int as n from ai_runs r join ai_checkpoints c on c.run_id = r.id
        where r.kind = 'po9' group by r.id`,
    );
    expect(steps.filter((s) => s.n !== 11)).toEqual([]); // nine steps and two recorded values each
    // The pools really went through PgBouncer, and its transactions were many more than its servers.
    const stats = (await bouncer.show('stats')).find((s) => s.database === db.name);
    const servers = (await bouncer.show('pools')).find((p) => p.database === db.name);
    console.log(
      `through PgBouncer: ${kills} kills; ${stats?.total_xact_count} transactions on ${
        Number(servers?.sv_active ?? 0) + Number(servers?.sv_idle ?? 0)
      } server connections; 60/60 runs ended once, 50/50 charges once`,
    );
    expect(Number(stats?.total_xact_count)).toBeGreaterThan(500);
  }, 180_000);
});
