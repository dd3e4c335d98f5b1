import { INestApplication, Injectable } from '@nestjs/common';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import {
  CommandGateway,
  DurableExecutionModule,
  DurableStep,
  DurableWorkflow,
  IdempotentCommand,
  InvalidArgumentError,
  InvalidOptionsError,
  RunContext,
  RunRepository,
} from '../../src';
import {
  DURABLE_EXECUTION_MIGRATIONS,
  durableExecutionMigrations,
  durableMigrationStatus,
  revertDurableMigrations,
  runDurableMigrations,
  SchemaConflictError,
} from '../../src/migrations';
import { cli } from '../../src/cli/main';
import { DurableWorker } from '../../src/engine/worker.service';
import { RunStatsReader } from '../../src/store/run-stats.reader';
import { driveRun } from '../../src/testing';
import { bootApp, bootError, bootModules } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { waitFor } from '../helpers/processes';

const TABLES = [
  'ai_admin_sessions',
  'ai_budget_use',
  'ai_budgets',
  'ai_checkpoints',
  'ai_commands',
  'ai_events',
  'ai_limits',
  'ai_migrations',
  'ai_rate_tokens',
  'ai_rewound_checkpoints',
  'ai_run_stream',
  'ai_run_tags',
  'ai_runs',
  'ai_schedules',
  'ai_signals',
  'ai_slots',
  'ai_workers',
];
const NAME_RULE =
  'must be a plain PostgreSQL identifier: lowercase letters, digits and _, starting with a letter or _, at most 63 characters, not starting with pg_, not information_schema';

@Injectable()
class Doubler {
  @DurableStep()
  async double(v: number) {
    return v * 2;
  }
}

@Injectable()
class Ledger {
  @IdempotentCommand({ name: 'book', inDoubt: 'retry-with-key', requiresApproval: true })
  async book(args: { v: number }) {
    return { booked: args.v };
  }
}

/** A step, a signal wait and an approved command: most of the run-state statements, in one run. */
@DurableWorkflow('schema-flow')
class SchemaFlow {
  constructor(
    private readonly doubler: Doubler,
    private readonly ledger: Ledger,
  ) {}
  async run(input: { v: number }, ctx: RunContext) {
    const doubled = await this.doubler.double(input.v);
    const { add } = await ctx.waitForSignal<{ add: number }>('go');
    return this.ledger.book({ v: doubled + add });
  }
}

@DurableWorkflow('schema-echo')
class SchemaEcho {
  constructor(private readonly doubler: Doubler) {}
  async run(input: { v: number }) {
    return this.doubler.double(input.v);
  }
}

const PROVIDERS = [Doubler, Ledger, SchemaFlow, SchemaEcho];

/** The module's tables in `schema`, by name. */
async function tablesIn(db: TestDatabase, schema: string): Promise<string[]> {
  const rows = await db.query<{ table_name: string }>(
    `select table_name from information_schema.tables
      where table_schema = $1 and table_name like 'ai\\_%'
        and not (select relispartition from pg_class where oid = format('%I.%I', table_schema, table_name)::regclass)
      order by table_name`,
    [schema],
  );
  return rows.map((r) => r.table_name);
}

/** Drives a `schema-flow` run through its signal and its approval to the end, in `app` only. */
async function driveFlow(app: INestApplication, v: number, others: INestApplication[]): Promise<string> {
  const runs = app.get(RunRepository);
  const { run } = await runs.start('schema-flow', { v });
  const othersClaim = async () => {
    for (const other of others) expect(await other.get(DurableWorker).tick()).toBe(0);
  };
  await othersClaim();
  expect((await driveRun(app, run.id, ['waiting'])).parkedReason).toMatch(/signal/);
  await runs.signal(run.id, 'go', { add: 1 });
  await othersClaim();
  await driveRun(app, run.id, ['waiting']);
  const [pending] = await app.get(CommandGateway).listForRun(run.id, { status: 'awaiting_approval' });
  await runs.approve(run.id, pending.idempotencyKey, { by: 'ops' });
  await othersClaim();
  const result = runs.result(run.id, { timeoutMs: 10_000 });
  expect((await driveRun(app, run.id)).status).toBe('succeeded');
  await expect(result).resolves.toEqual({ booked: 2 * v + 1 });
  return run.id;
}

describe('database.schema: the tables in a schema of their own', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase('schema');
  });
  afterAll(async () => {
    await db?.drop();
  });

  describe('two modules on one database, schemas a and b', () => {
    let a: INestApplication;
    let b: INestApplication;
    beforeAll(async () => {
      a = await bootApp(db.url, PROVIDERS, { database: { url: db.url, schema: 'a' } });
      b = await bootApp(db.url, PROVIDERS, { database: { url: db.url, schema: 'b' } });
    });
    afterAll(async () => {
      await a?.close();
      await b?.close();
    });

    it('each migrates its own schema (created by the migration) and nothing lands in public', async () => {
      expect(await tablesIn(db, 'a')).toEqual(TABLES);
      expect(await tablesIn(db, 'b')).toEqual(TABLES);
      expect(await tablesIn(db, 'public')).toEqual([]);
      const [{ name }] = await db.query(`select name from a.ai_migrations order by id limit 1`);
      expect(name).toBe('a.CreateDurableExecutionSchema1764400000000');
    });

    it('a run started in a is driven by a only (step, signal, approval, result): b never claims it, nor a b run', async () => {
      const inA = await driveFlow(a, 5, [b]);
      const inB = await driveFlow(b, 7, [a]);
      expect(await b.get(RunRepository).get(inA)).toBeNull();
      expect(await a.get(RunRepository).get(inB)).toBeNull();
      const counts = await db.query(
        `select (select count(*) from a.ai_runs)::int as a, (select count(*) from b.ai_runs)::int as b,
                (select count(*) from a.ai_commands where status = 'succeeded')::int as a_commands,
                (select count(*) from b.ai_signals)::int as b_signals`,
      );
      expect(counts).toEqual([{ a: 1, b: 1, a_commands: 1, b_signals: 1 }]);
      expect((await a.get(RunStatsReader).read()).byStatus).toEqual({ succeeded: 1 });
      const listed = await a.get(RunRepository).list();
      expect(listed.items.map((r) => r.id)).toEqual([inA]);
      // The history reads (whole and paged) are written for the schema too.
      const runsA = a.get(RunRepository);
      const events = await runsA.events(inA);
      expect(events.length).toBeGreaterThan(3);
      const newest = await runsA.events(inA, { newestFirst: true, limit: 2 });
      expect(newest.map((e) => e.id)).toEqual(
        events
          .slice(-2)
          .reverse()
          .map((e) => e.id),
      );
      expect(await runsA.events(inA, { after: events[0].id, limit: 1 })).toEqual([events[1]]);
      expect((await runsA.checkpoints(inA)).length).toBeGreaterThan(0);
      expect(await b.get(RunRepository).events(inA)).toEqual([]);
    });
  });

  describe('NOTIFY: each schema has its own wake-up and end channels', () => {
    let a: INestApplication;
    let b: INestApplication;
    let listener: Client;
    const heard: string[] = [];
    beforeAll(async () => {
      const worker = { enabled: true, pollIntervalMs: 60_000, heartbeatMs: 1000, leaseTtlMs: 5000 };
      a = await bootApp(db.url, PROVIDERS, { database: { url: db.url, schema: 'a' }, worker });
      b = await bootApp(db.url, PROVIDERS, { database: { url: db.url, schema: 'b' }, worker });
      listener = new Client({ connectionString: db.url });
      await listener.connect();
      for (const channel of ['wake', 'wake_a', 'wake_b', 'done', 'done_a', 'done_b'])
        await listener.query(`listen durable_execution_${channel}`);
      listener.on('notification', (n) => heard.push(`${n.channel.replace('durable_execution_', '')}`));
      await new Promise((r) => setTimeout(r, 500)); // the workers' listeners connect
    });
    afterAll(async () => {
      await listener?.end();
      await a?.close();
      await b?.close();
    });

    it("a start in a wakes a's idle worker at once (poll interval 60 s) and never b's", async () => {
      const nudgedA = jest.spyOn(a.get(DurableWorker), 'nudge');
      const nudgedB = jest.spyOn(b.get(DurableWorker), 'nudge');
      const runs = a.get(RunRepository);
      const t0 = Date.now();
      const { run } = await runs.start('schema-echo', { v: 3 });
      await expect(runs.result(run.id, { timeoutMs: 5000 })).resolves.toBe(6);
      expect(Date.now() - t0).toBeLessThan(3000);
      await new Promise((r) => setTimeout(r, 300)); // any stray notification arrives
      expect(nudgedA).toHaveBeenCalled();
      expect(nudgedB).not.toHaveBeenCalled();
      // done_a only when the run was still live when result() marked it: announcements go to a's channel.
      expect(heard).toContain('wake_a');
      expect(heard.filter((h) => !h.endsWith('_a'))).toEqual([]);

      heard.length = 0;
      nudgedA.mockClear();
      const inB = await b.get(RunRepository).start('schema-echo', { v: 4 });
      await expect(b.get(RunRepository).result(inB.run.id, { timeoutMs: 5000 })).resolves.toBe(8);
      await new Promise((r) => setTimeout(r, 300));
      expect(nudgedB).toHaveBeenCalled();
      expect(nudgedA).not.toHaveBeenCalled();
      expect(heard).toContain('wake_b');
      expect(heard.filter((h) => !h.endsWith('_b'))).toEqual([]);
    });
  });

  describe("two schemas on one borrowed DataSource (the app's pool)", () => {
    let shared: DataSource;
    let apps: INestApplication[] = [];
    beforeAll(async () => {
      // One connection: both modules' prepared statements meet on it, and pg refuses one name for two texts.
      shared = new DataSource({ type: 'postgres', url: db.url, extra: { max: 1 } });
      await shared.initialize();
      apps = await Promise.all(
        ['a', 'b'].map((schema) =>
          bootModules({
            imports: [
              DurableExecutionModule.forRoot({
                database: { dataSource: shared, schema },
                worker: { enabled: false },
                reconciler: { enabled: false },
              }),
            ],
            providers: PROVIDERS,
          }),
        ),
      );
    });
    afterAll(async () => {
      for (const app of apps) await app.close();
      await shared?.destroy();
    });

    it('both drive runs through the same connection, each in its schema; the pool never sets search_path', async () => {
      for (let round = 0; round < 2; round++) {
        const ids = await Promise.all(
          apps.map((app) => app.get(RunRepository).start('schema-echo', { v: 1 })),
        );
        const done = await Promise.all(apps.map((app, i) => driveRun(app, ids[i].run.id)));
        expect(done.map((r) => r.status)).toEqual(['succeeded', 'succeeded']);
      }
      expect(await shared.query(`show search_path`)).toEqual([{ search_path: '"$user", public' }]);
      const [row] = await db.query(
        `select (select count(*) from a.ai_runs where kind = 'schema-echo')::int as a,
                (select count(*) from b.ai_runs where kind = 'schema-echo')::int as b`,
      );
      expect(row.a).toBeGreaterThanOrEqual(3);
      expect(row.b).toBeGreaterThanOrEqual(3);
    });
  });
});

describe('database.schema: migrations outside the module', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase('schemamig');
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('the CLI: status, migrate, status and revert --all with --schema, and DURABLE_EXECUTION_SCHEMA', async () => {
    const run = async (args: string[], env: NodeJS.ProcessEnv = {}) => {
      const out: string[] = [];
      const err: string[] = [];
      const code = await cli(
        args,
        { DATABASE_URL: db.url, ...env },
        (l) => out.push(l),
        (l) => err.push(l),
      );
      return { code, out, err };
    };
    const names = DURABLE_EXECUTION_MIGRATIONS.map((m) => `cli.${new m().name}`);
    expect(await run(['status', '--schema', 'cli'])).toEqual({
      code: 0,
      out: names.map((n) => `pending  ${n}`),
      err: [],
    });
    expect(await run(['migrate', '--schema=cli'])).toEqual({
      code: 0,
      out: [`durable-execution: applied ${names.join(', ')}`],
      err: [],
    });
    expect(await tablesIn(db, 'cli')).toEqual(TABLES);
    expect(await tablesIn(db, 'public')).toEqual([]);
    expect(await run(['status'], { DURABLE_EXECUTION_SCHEMA: 'cli' })).toEqual({
      code: 0,
      out: names.map((n) => `applied  ${n}`),
      err: [],
    });
    // The flag wins over the variable; the default schema (public) has nothing applied.
    expect((await run(['status', '--schema', 'public'], { DURABLE_EXECUTION_SCHEMA: 'cli' })).out).toEqual(
      DURABLE_EXECUTION_MIGRATIONS.map((m) => `pending  ${new m().name}`),
    );
    expect(await run(['revert', '--all', '--schema', 'cli'])).toEqual({
      code: 0,
      out: [`durable-execution: reverted ${[...names].reverse().join(', ')}`],
      err: [],
    });
    expect(await tablesIn(db, 'cli')).toEqual(['ai_migrations']);
  });

  it('the CLI refuses a schema that is not a plain identifier with exit 2, naming where it came from', async () => {
    const run = async (args: string[], env: NodeJS.ProcessEnv = {}) => {
      const err: string[] = [];
      const code = await cli(
        args,
        { DATABASE_URL: db.url, ...env },
        () => undefined,
        (l) => err.push(l),
      );
      return { code, first: err.join('\n').split('\n')[0] };
    };
    expect(await run(['migrate', '--schema', 'Durable'])).toEqual({
      code: 2,
      first: `nestjs-durable-execution: --schema: ${NAME_RULE}; got 'Durable'`,
    });
    expect(await run(['status'], { DURABLE_EXECUTION_SCHEMA: 'a;drop' })).toEqual({
      code: 2,
      first: `nestjs-durable-execution: DURABLE_EXECUTION_SCHEMA: ${NAME_RULE}; got 'a;drop'`,
    });
  });

  it("the app's own migrations: durableExecutionMigrations({ schema }) in its DataSource, the module with migrationsRun false", async () => {
    expect(durableExecutionMigrations()).toEqual(DURABLE_EXECUTION_MIGRATIONS);
    expect(durableExecutionMigrations({ schema: 'public' })).toEqual(DURABLE_EXECUTION_MIGRATIONS);
    const appDs = new DataSource({
      type: 'postgres',
      url: db.url,
      migrations: durableExecutionMigrations({ schema: 'owned' }),
    });
    await appDs.initialize();
    try {
      const ran = await appDs.runMigrations();
      expect(ran.map((m) => m.name)).toEqual(
        DURABLE_EXECUTION_MIGRATIONS.map((m) => `owned.${new m().name}`),
      );
      expect(await tablesIn(db, 'owned')).toEqual(TABLES.filter((t) => t !== 'ai_migrations'));
      const recorded = await db.query(`select count(*)::int as n from public.migrations`);
      expect(recorded).toEqual([{ n: DURABLE_EXECUTION_MIGRATIONS.length }]);

      const app = await bootApp(db.url, PROVIDERS, {
        database: { url: db.url, schema: 'owned', migrationsRun: false },
      });
      try {
        const { run } = await app.get(RunRepository).start('schema-echo', { v: 2 });
        expect((await driveRun(app, run.id)).output).toBe(4);
      } finally {
        await app.close();
      }
      const err = await bootError({
        imports: [DurableExecutionModule.forRoot({ database: { url: db.url, schema: 'owned' } })],
      });
      expect(err).toBeInstanceOf(SchemaConflictError);
      expect((err as SchemaConflictError).tables).toContain('owned.ai_runs');
      expect((err as SchemaConflictError).migrationsTable).toBe('owned.ai_migrations');
      expect(
        (await durableMigrationStatus({ type: 'postgres', url: db.url }, { schema: 'owned' }))
          .unrecordedTables,
      ).toHaveLength(5);
    } finally {
      await appDs.undoLastMigration().catch(() => undefined);
      await appDs.destroy();
    }
  });

  it('an invalid schema is refused before anything is written: by the module naming database.schema, by the functions naming schema', async () => {
    const err = await bootError({
      imports: [DurableExecutionModule.forRoot({ database: { url: db.url, schema: 'Durable-1' } })],
    });
    expect(err).toBeInstanceOf(InvalidOptionsError);
    expect((err as InvalidOptionsError).problems).toEqual([`database.schema: ${NAME_RULE}; got 'Durable-1'`]);
    const source = { type: 'postgres' as const, url: db.url };
    for (const attempt of [
      () => runDurableMigrations(source, { schema: 'x"y' }),
      () => durableMigrationStatus(source, { schema: 'pg_x' }),
      () => revertDurableMigrations(source, 1, { schema: 'X' }),
      async () => durableExecutionMigrations({ schema: '1x' }),
    ]) {
      await expect(attempt()).rejects.toMatchObject({ field: 'schema', code: 'DURABLE_INVALID_ARGUMENT' });
      await expect(attempt()).rejects.toBeInstanceOf(InvalidArgumentError);
    }
    expect(
      await db.query(`select nspname from pg_namespace where nspname in ('Durable-1', 'x"y', 'X', '1x')`),
    ).toEqual([]);
  });

  it('runDurableMigrations with a schema waits for nothing the default schema holds (a lock of its own)', async () => {
    const locker = new Client({ connectionString: db.url });
    await locker.connect();
    try {
      await locker.query('select pg_advisory_lock(7402113901)'); // the default schema's migration lock
      await expect(
        runDurableMigrations({ type: 'postgres', url: db.url }, { schema: 'locked' }),
      ).resolves.toHaveLength(DURABLE_EXECUTION_MIGRATIONS.length);
      await waitFor(async () => (await tablesIn(db, 'locked')).length === TABLES.length, 1000, 'the tables');
    } finally {
      await locker.end();
    }
  });
});
