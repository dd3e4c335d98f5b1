import { INestApplication, Injectable, LoggerService } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Client, Pool } from 'pg';
import { DurableStep, DurableWorkflow, RunContext, RunRepository } from '../../src';
import { DurableDatabase } from '../../src/store/durable-database';
import { durableModule } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { waitFor } from '../helpers/processes';
import { PgBouncer, pgbouncerTestsRun, startPgBouncer } from '../pgbouncer/pgbouncer';

@Injectable()
class Echo {
  @DurableStep()
  async echo(v: number) {
    return v;
  }
}

@DurableWorkflow('pgb-steps')
class StepsWorkflow {
  constructor(private readonly e: Echo) {}
  async run(input: { v: number }) {
    let sum = 0;
    for (let i = 0; i < 3; i++) sum += await this.e.echo(input.v + i);
    return sum;
  }
}

@DurableWorkflow('pgb-waits')
class WaitsWorkflow {
  constructor(private readonly e: Echo) {}
  async run(input: { v: number }, ctx: RunContext) {
    await ctx.sleep(50);
    const got = await ctx.waitForSignal<{ n: number }>('go', { timeoutMs: 60_000 });
    return (await this.e.echo(input.v)) + got.n + ctx.random();
  }
}

/** Every log line of every context (the pg errors of a claim or a commit are logged, not thrown). */
class AllLines implements LoggerService {
  readonly lines: string[] = [];
  log = (m: unknown) => void this.lines.push(String(m));
  error = (m: unknown) => void this.lines.push(String(m));
  warn = (m: unknown) => void this.lines.push(String(m));
  debug = () => undefined;
  verbose = () => undefined;
}

const run = pgbouncerTestsRun() ? describe : describe.skip;

/**
 * PgBouncer 1.18 in transaction mode hands each transaction whichever server connection is free. A named
 * prepared statement is parsed on one server connection, and pg sends only its name afterwards, from
 * any of them: `prepared statement "dx_…" does not exist`. `database.preparedStatements: false` sends
 * every statement unnamed. These tests show both sides on a PgBouncer with two server connections, so
 * the suite through PgBouncer (pgbouncer-suite) fails if the unnamed mode ever breaks.
 */
run('PgBouncer in transaction mode: prepared statements and session state', () => {
  let db: TestDatabase;
  let bouncer: PgBouncer;
  const apps: INestApplication[] = [];

  beforeAll(async () => {
    db = await createTestDatabase('pgb_stmt');
    bouncer = await startPgBouncer(db.url, { poolSize: 2 });
  });
  afterEach(async () => {
    for (const app of apps.splice(0)) await app.close();
    await db.query(`delete from ai_runs`).catch(() => undefined);
  });
  afterAll(async () => {
    await bouncer?.stop();
    await db?.drop();
  });

  async function boot(preparedStatements: boolean, poolSize: number, logger?: AllLines, worker = true) {
    const moduleRef = await Test.createTestingModule({
      imports: [
        durableModule(bouncer.via(db.url), {
          database: { directUrl: db.url, preparedStatements, poolSize },
          worker: {
            enabled: worker,
            concurrency: 8,
            pollIntervalMs: 50,
            leaseTtlMs: 5000,
            heartbeatMs: 1000,
          },
        }),
      ],
      providers: [Echo, StepsWorkflow, WaitsWorkflow],
    }).compile();
    const app = moduleRef.createNestApplication({ logger: logger ?? false });
    await app.init();
    apps.push(app);
    return app;
  }

  it.each([
    [true, 'fails: the statement was prepared on another server connection'],
    [false, 'passes'],
  ])('a statement sent again from one connection after PgBouncer moved it (named: %s) %s', async (named) => {
    const app = await boot(named, 1, undefined, false); // no worker: nothing else uses the pool
    const dx = app.get(DurableDatabase);
    expect((await dx.query('select $1::int as v', [1], 'dx_probe')).rows[0].v).toBe(1);
    // Another client holds the server connection that statement ran on: ours gets another one.
    const blocker = new Client({ connectionString: bouncer.via(db.url) });
    await blocker.connect();
    try {
      await blocker.query('begin');
      await blocker.query('select 1');
      const again = await dx.query('select $1::int as v', [2], 'dx_probe').then(
        (r) => r.rows[0].v,
        (e: Error & { code?: string }) => `${e.code}: ${e.message}`,
      );
      expect(again).toBe(named ? '26000: prepared statement "dx_probe" does not exist' : 2);
    } finally {
      await blocker.query('rollback');
      await blocker.end();
    }
  });

  it('the engine with named statements through transaction pooling: runs fail to start or to progress', async () => {
    const logger = new AllLines();
    const app = await boot(true, 6, logger);
    const runs = app.get(RunRepository);
    const starts = await Promise.allSettled(
      Array.from({ length: 30 }, (_, v) => runs.start('pgb-steps', { v })),
    );
    const refused = starts.filter((s) => s.status === 'rejected').map((s) => String(s.reason));
    await new Promise((r) => setTimeout(r, 3000));
    const errors = [...refused, ...logger.lines].filter((l) => /prepared statement "dx_\w+"/.test(l));
    const [{ n }] = await db.query(`select count(*)::int as n from ai_runs where status = 'succeeded'`);
    console.log(
      `named statements via PgBouncer: ${refused.length}/30 starts refused, ${errors.length} errors naming a dx_ statement, ${n} runs succeeded`,
    );
    expect(errors.length).toBeGreaterThan(0);
  });

  it('the engine with unnamed statements: every run finishes once, and the pool carries no session state', async () => {
    const app = await boot(false, 6);
    const dx = app.get(DurableDatabase);
    const pool = dx.pool as Pool & { query: (...a: unknown[]) => unknown };
    const sent: Array<{ text: string; name?: string }> = [];
    const query = pool.query.bind(pool);
    pool.query = ((config: unknown, ...rest: unknown[]) => {
      const c = typeof config === 'string' ? { text: config } : (config as { text: string; name?: string });
      sent.push({ text: c.text, name: c.name });
      return query(config, ...rest);
    }) as typeof pool.query;
    const runs = app.get(RunRepository);
    const ids: string[] = [];
    for (let v = 0; v < 30; v++) ids.push((await runs.start('pgb-steps', { v })).run.id);
    const waits: string[] = [];
    for (let v = 0; v < 5; v++) waits.push((await runs.start('pgb-waits', { v })).run.id);
    const cancelled = (await runs.start('pgb-waits', { v: 99 })).run.id;
    await waitFor(
      async () => (await Promise.all(waits.map((id) => runs.get(id)))).every((r) => r!.status === 'waiting'),
      20_000,
      'the waiting runs to park',
    );
    for (const id of waits) await runs.signal(id, 'go', { n: 1 });
    await runs.cancel(cancelled, 'test');
    await waitFor(
      async () => {
        const [{ n }] = await db.query(
          `select count(*)::int as n from ai_runs where status in ('succeeded', 'cancelled')`,
        );
        return n === 36;
      },
      30_000,
      'every run to end',
    );
    const ended = await db.query(
      `select run_id, count(*)::int as n from ai_events
        where event_type in ('run.succeeded', 'run.cancelled') group by run_id`,
    );
    expect(ended).toHaveLength(36);
    expect(ended.filter((e) => e.n !== 1)).toEqual([]); // each run ended exactly once
    // Nothing on the pool depends on its session: no statement by name, no SET or RESET (SET LOCAL is
    // fine), no LISTEN, no session advisory lock, no temp table, no PREPARE/DISCARD.
    expect(sent.length).toBeGreaterThan(100);
    expect(sent.filter((s) => s.name)).toEqual([]);
    const session =
      /^\s*(set\s+(?!local\b)|reset\b|listen\b|unlisten\b|prepare\b|deallocate\b|discard\b)|create\s+(temp|temporary)\b|pg_(try_)?advisory_(un)?lock(_shared)?\s*\(/i;
    expect(sent.filter((s) => session.test(s.text)).map((s) => s.text)).toEqual([]);
    // ...and the LISTEN connections are direct: none of the backends that listen is a PgBouncer server.
    const viaBouncer = new Set((await bouncer.show('servers')).map((s) => Number(s.remote_pid)));
    const listeners = await db.query(
      `select pid from pg_stat_activity where datname = current_database() and query ilike 'listen %'`,
    );
    expect(listeners.length).toBeGreaterThan(0);
    expect(listeners.filter((l) => viaBouncer.has(Number(l.pid)))).toEqual([]);
  });
});
