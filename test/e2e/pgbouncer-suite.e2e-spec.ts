import { serverUrl } from '../helpers/database';
import { PgBouncer, pgbouncerTestsRun, startPgBouncer } from '../pgbouncer/pgbouncer';
import { PGBOUNCER_ENV } from '../pgbouncer/route';

/**
 * The core worker tests again, with every app's pool (in process and in the worker processes they fork)
 * through PgBouncer 1.18 in transaction mode, `preparedStatements: false`, and the LISTEN connections
 * and the migration lock on the direct URL (`directUrl`): test/pgbouncer/route.ts. The specs are the
 * very files that run directly; required here, their tests register under this describe. What each
 * covers through the pooler: steps, retries, replay, a stale executor (durable-steps); commands,
 * approvals, signals, sleep, cancel (commands); wake-ups by NOTIFY on the direct LISTEN connection, also
 * after pg_terminate_backend (wake-up); a cancel racing the finish (cancel-wins); a worker process
 * SIGKILLed after each step commit in turn (crash-resume). Random kills under load through PgBouncer:
 * pgbouncer-crash; what breaks without the unnamed mode: pgbouncer-statements.
 */
const suite = pgbouncerTestsRun() ? describe : describe.skip;

suite('through PgBouncer 1.18 (transaction pooling, unnamed statements, direct LISTEN)', () => {
  let bouncer: PgBouncer | undefined;
  beforeAll(async () => {
    bouncer = await startPgBouncer(serverUrl(), { poolSize: 20 });
    process.env[PGBOUNCER_ENV] = String(bouncer.port);
  });
  afterAll(async () => {
    delete process.env[PGBOUNCER_ENV];
    await bouncer?.stop();
  });

  /* eslint-disable @typescript-eslint/no-require-imports */
  require('./durable-steps.e2e-spec');
  require('./wake-up.e2e-spec');
  require('./commands.e2e-spec');
  require('./cancel-wins.e2e-spec');
  require('./crash-resume.e2e-spec');
  /* eslint-enable @typescript-eslint/no-require-imports */

  it('the pools of those tests really went through PgBouncer', async () => {
    const stats = await bouncer!.show('stats');
    const xacts = stats.reduce((n, s) => n + Number(s.total_xact_count), 0);
    console.log(`PgBouncer carried ${xacts} transactions for the suite`);
    expect(xacts).toBeGreaterThan(1000);
  });
});
