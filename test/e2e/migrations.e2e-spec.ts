import { ChildProcess, execSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import {
  DURABLE_EXECUTION_MIGRATIONS,
  DURABLE_MIGRATIONS_TABLE,
  revertDurableMigrations,
  runDurableMigrations,
  SchemaConflictError,
} from '../../src/migrations';
import { Client } from 'pg';
import { DataSource, MigrationInterface, QueryRunner } from 'typeorm';
import { DurableWorkflow, RunRepository } from '../../src';
import { MIGRATION_LOCK_KEY } from '../../src/durable-execution.constants';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil } from '../helpers/drive';

const ROOT = resolve(__dirname, '../..');
const PACKAGE = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  bin: Record<string, string>;
  scripts: Record<string, string>;
};
/** The package's bin, as `npx nestjs-durable-execution` runs it. */
const BIN = join(ROOT, PACKAGE.bin['nestjs-durable-execution']);
/** The older entry, kept for `node dist/src/cli/migrate.js [--revert]`. */
const LEGACY_CLI = join(ROOT, 'dist/src/cli/migrate.js');
const FIXTURE = join(ROOT, 'test/fixtures/migrate-concurrently.ts');
const TABLES = [
  'ai_runs',
  'ai_checkpoints',
  'ai_commands',
  'ai_events',
  'ai_signals',
  'ai_admin_sessions',
  'ai_workers',
  'ai_limits',
  'ai_slots',
  'ai_schedules',
  'ai_rate_tokens',
  'ai_budgets',
  'ai_budget_use',
  'ai_run_stream',
  'ai_run_tags',
  'ai_rewound_checkpoints',
];
const MIGRATION_NAMES = DURABLE_EXECUTION_MIGRATIONS.map((m) => m.name);

/** Which of the module's tables exist (plus its migrations table), by name. */
async function existingTables(db: TestDatabase): Promise<string[]> {
  const rows = await db.query<{ table_name: string }>(
    `select table_name from information_schema.tables
      where table_schema = 'public' and table_name like 'ai\\_%'
        and not (select relispartition from pg_class where oid = format('%I.%I', table_schema, table_name)::regclass)
      order by table_name`,
  );
  return rows.map((r) => r.table_name);
}

/** Expects `fn` to fail with the PostgreSQL error `code` (e.g. 23514 check_violation). */
async function expectPgError(fn: () => Promise<unknown>, code: string): Promise<void> {
  await expect(fn()).rejects.toMatchObject({ code });
}

/** The source files the CLI in dist is compiled from: rebuild when one is newer than the build. */
function distIsStale(): boolean {
  if (!existsSync(BIN) || !existsSync(LEGACY_CLI)) return true;
  const built = Math.min(statSync(BIN).mtimeMs, statSync(LEGACY_CLI).mtimeMs);
  const sources = [
    'src/cli/main.ts',
    'src/cli/migrate.ts',
    'src/store/run-migrations.ts',
    'src/store/durable-names.ts',
    'src/options/schema-name.ts',
    'src/errors/invalid-argument.error.ts',
    'src/durable-execution.constants.ts',
    'src/errors/schema-conflict.error.ts',
    'src/errors/durable-execution.error.ts',
    ...readdirSync(join(ROOT, 'migrations')).map((f) => `migrations/${f}`),
  ];
  return sources.some((f) => statSync(join(ROOT, f)).mtimeMs > built);
}

/** Builds dist when the CLI there is missing or older than its sources (tests run the built bin). */
function ensureBuilt(): void {
  if (distIsStale()) execSync('npm run build', { cwd: ROOT, stdio: 'pipe' });
}

/** The outcome of one CLI run: exit status, stdout, stderr. */
interface CliResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the built bin (or `entry`) with `args` and `env`, never throwing on a non-zero exit. */
function runCli(env: NodeJS.ProcessEnv, args: string[], entry = BIN): CliResult {
  const res = spawnSync(process.execPath, [entry, ...args], { cwd: ROOT, env, encoding: 'utf8' });
  return { status: res.status, stdout: res.stdout, stderr: res.stderr };
}

/** `process.env` without DATABASE_URL, plus `extra`. */
function envWithout(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env = { ...process.env, ...extra };
  if (!('DATABASE_URL' in extra)) delete env.DATABASE_URL;
  return env;
}

@DurableWorkflow('migr-echo')
class EchoWorkflow {
  async run(input: unknown) {
    return input;
  }
}

/** One of the app's own migrations, listed beside the module's in the app's DataSource. */
class CreateAppOrders1700000000000 implements MigrationInterface {
  name = 'CreateAppOrders1700000000000';
  async up(q: QueryRunner): Promise<void> {
    await q.query(`create table app_orders (id int primary key)`);
  }
  async down(q: QueryRunner): Promise<void> {
    await q.query(`drop table app_orders`);
  }
}

describe('migrations', () => {
  describe('at boot (database.migrationsRun)', () => {
    let db: TestDatabase;
    let locker: Client;
    beforeAll(async () => {
      db = await createTestDatabase('migrboot');
      locker = new Client({ connectionString: db.url });
      await locker.connect();
    });
    afterAll(async () => {
      await locker?.end();
      await db?.drop();
    });

    /** Boots the module on `db` and closes it again; resolves when the boot completed. */
    const bootAndClose = async () => {
      const app = await bootApp(db.url);
      await app.close();
    };

    it('an up-to-date schema boots without the migration lock; a pending migration waits for it', async () => {
      await runDurableMigrations({ type: 'postgres', url: db.url });
      // Someone (another pod migrating) holds the migration lock for the whole test.
      await locker.query('select pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
      try {
        // Up to date: the boot reads ai_migrations through its own pool and never asks for the lock.
        await bootAndClose();

        // One migration pending: the boot must take the lock, so it waits until the holder lets go.
        await locker.query('select pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]);
        await revertDurableMigrations({ type: 'postgres', url: db.url }, 1);
        await locker.query('select pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
        let booted = false;
        const boot = bootAndClose().then(() => (booted = true));
        await new Promise((r) => setTimeout(r, 1500));
        expect(booted).toBe(false);
        await locker.query('select pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]);
        await boot;
        const names = await db.query<{ name: string }>(`select name from ${DURABLE_MIGRATIONS_TABLE}`);
        expect(names.map((r) => r.name).sort()).toEqual([...MIGRATION_NAMES].sort());
      } finally {
        await locker.query('select pg_advisory_unlock_all()');
      }
    }, 30_000);
  });

  describe("an app DataSource with TypeORM's `schema` option (its entities elsewhere)", () => {
    let db: TestDatabase;
    beforeAll(async () => {
      db = await createTestDatabase('migrappschema');
    });
    afterAll(async () => {
      await db?.drop();
    });

    it("a borrowed DataSource with TypeORM's own `schema` option: ai_migrations lands beside the tables, and the next boot finds them current", async () => {
      await db.query(`create schema app_entities`);
      const appDs = new DataSource({ type: 'postgres', url: db.url, schema: 'app_entities' });
      await appDs.initialize();
      try {
        for (let boot = 0; boot < 2; boot++) {
          const app = await bootApp(db.url, [], { database: { url: undefined, dataSource: appDs } });
          await app.close();
        }
        // database.schema is the default: the tables and their migration record both resolve unqualified.
        const [where] = await db.query<{ tables: string; record: string | null }>(
          `select to_regclass('ai_runs')::text as tables, to_regclass('ai_migrations')::text as record,
                  to_regclass('app_entities.ai_migrations')::text as stray`,
        );
        expect(where).toEqual({ tables: 'ai_runs', record: 'ai_migrations', stray: null });
        const recorded = await db.query<{ name: string }>(`select name from ai_migrations`);
        expect(recorded.map((r) => r.name).sort()).toEqual([...MIGRATION_NAMES].sort());
      } finally {
        await appDs.destroy();
      }
    }, 30_000);
  });

  describe('schema', () => {
    let db: TestDatabase;
    beforeAll(async () => {
      db = await createTestDatabase('migr');
    });
    afterAll(async () => {
      await db?.drop();
    });

    it('reverting a database that never had the schema changes nothing', async () => {
      await revertDurableMigrations({ type: 'postgres', url: db.url });
      expect(await existingTables(db)).toEqual([]);
    });

    it("applies with an app's DataSource options (dropSchema, synchronize, a pool of one) without touching the app's tables", async () => {
      await db.query(`create table app_orders (id int primary key)`);
      await db.query(`insert into app_orders values (1), (2)`);
      const applied = await runDurableMigrations({
        type: 'postgres',
        url: db.url,
        dropSchema: true,
        synchronize: true,
        migrationsRun: true,
        extra: { max: 1 },
      });
      expect(applied).toEqual(MIGRATION_NAMES);
      expect(await db.query(`select id from app_orders order by id`)).toEqual([{ id: 1 }, { id: 2 }]);
      expect(await existingTables(db)).toEqual([...TABLES, DURABLE_MIGRATIONS_TABLE].sort());
      // The app's own migrations table was never created: only ai_migrations records the module's.
      expect((await db.query(`select to_regclass('migrations') as t`))[0].t).toBeNull();
    }, 15_000);

    it('up is idempotent, down drops every table, up again restores them', async () => {
      const url = { type: 'postgres' as const, url: db.url };
      expect(await runDurableMigrations(url)).toEqual([]);
      expect(await db.query(`select name from ${DURABLE_MIGRATIONS_TABLE}`)).toEqual(
        MIGRATION_NAMES.map((name) => ({ name })),
      );

      await revertDurableMigrations(url);
      expect(await existingTables(db)).toEqual([DURABLE_MIGRATIONS_TABLE]);
      expect(await db.query(`select * from ${DURABLE_MIGRATIONS_TABLE}`)).toEqual([]);
      // Reverting again is a no-op, not an error.
      await revertDurableMigrations(url);

      expect(await runDurableMigrations(url)).toEqual(MIGRATION_NAMES);
      expect(await existingTables(db)).toEqual([...TABLES, DURABLE_MIGRATIONS_TABLE].sort());
      expect(await db.query(`select count(*)::int as n from ${DURABLE_MIGRATIONS_TABLE}`)).toEqual([
        { n: MIGRATION_NAMES.length },
      ]);
    });

    it('status CHECK constraints on ai_runs and ai_commands list exactly the allowed statuses', async () => {
      const checks = await db.query<{ table: string; def: string }>(
        `select conrelid::regclass::text as table, pg_get_constraintdef(oid) as def
           from pg_constraint where contype = 'c' and conrelid in ('ai_runs'::regclass, 'ai_commands'::regclass)`,
      );
      const statusCheck = (table: string) => {
        const defs = checks.filter((c) => c.table === table && /\(status = ANY/.test(c.def));
        expect(defs).toHaveLength(1);
        return [...defs[0].def.matchAll(/'([a-z_]+)'::text/g)].map((m) => m[1]).sort();
      };
      expect(statusCheck('ai_runs')).toEqual(
        ['pending', 'running', 'waiting', 'succeeded', 'failed', 'cancelled', 'dead_lettered'].sort(),
      );
      expect(statusCheck('ai_commands')).toEqual(
        ['pending', 'succeeded', 'failed', 'in_doubt', 'awaiting_approval', 'approved', 'rejected'].sort(),
      );
      // And PostgreSQL enforces them.
      await expectPgError(
        () => db.query(`insert into ai_runs (kind, input, status) values ('k', '{}', 'bogus')`),
        '23514',
      );
      const [{ id }] = await db.query(`insert into ai_runs (kind, input) values ('k', '{}') returning id`);
      await expectPgError(
        () =>
          db.query(
            `insert into ai_commands (idempotency_key, run_id, step_index, command_name, payload, status, epoch)
             values ('c-bogus', $1, 0, 'c', '{}', 'bogus', 0)`,
            [id],
          ),
        '23514',
      );
      // A running run must have an owner and a lease.
      await expectPgError(
        () => db.query(`update ai_runs set status = 'running' where id = $1`, [id]),
        '23514',
      );
      await db.query(`delete from ai_runs where id = $1`, [id]);
    });

    it('ai_checkpoints, ai_commands, ai_events, ai_rewound_checkpoints, ai_run_stream, ai_run_tags and ai_signals reference ai_runs(id) ON DELETE CASCADE', async () => {
      const fks = await db.query<{
        child: string;
        parent: string;
        on_delete: string;
        cols: string;
        ref_cols: string;
      }>(
        `select c.conrelid::regclass::text as child, c.confrelid::regclass::text as parent,
                c.confdeltype::text as on_delete,
                (select string_agg(a.attname, ',') from unnest(c.conkey) k join pg_attribute a
                   on a.attrelid = c.conrelid and a.attnum = k) as cols,
                (select string_agg(a.attname, ',') from unnest(c.confkey) k join pg_attribute a
                   on a.attrelid = c.confrelid and a.attnum = k) as ref_cols
           from pg_constraint c where c.contype = 'f' and c.conparentid = 0 order by child`,
      );
      expect(fks).toEqual(
        [
          'ai_checkpoints',
          'ai_commands',
          'ai_events',
          'ai_rewound_checkpoints',
          'ai_run_stream',
          'ai_run_tags',
          'ai_signals',
        ].map((child) => ({
          child,
          parent: 'ai_runs',
          on_delete: 'c',
          cols: 'run_id',
          ref_cols: 'id',
        })),
      );
      // information_schema agrees on the rule.
      const rules = await db.query(
        `select distinct tc.table_name, rc.delete_rule from information_schema.referential_constraints rc
           join information_schema.table_constraints tc on tc.constraint_name = rc.constraint_name
          where not (select relispartition from pg_class where oid = format('%I', tc.table_name)::regclass)
          order by tc.table_name`,
      );
      expect(rules.map((r) => r.delete_rule)).toEqual(Array(7).fill('CASCADE'));
    });

    it('idempotency_key on ai_runs is unique', async () => {
      const uniques = await db.query(
        `select pg_get_constraintdef(oid) as def from pg_constraint
          where conrelid = 'ai_runs'::regclass and contype = 'u'`,
      );
      expect(uniques).toEqual([{ def: 'UNIQUE (idempotency_key)' }]);
      await db.query(`insert into ai_runs (kind, input, idempotency_key) values ('k', '{}', 'same')`);
      await expectPgError(
        () => db.query(`insert into ai_runs (kind, input, idempotency_key) values ('k', '{}', 'same')`),
        '23505',
      );
      // Keys are optional: any number of runs without one.
      await db.query(`insert into ai_runs (kind, input) values ('k', '{}'), ('k', '{}')`);
      await db.query(`delete from ai_runs`);
    });

    it('ai_runs_claim_idx is partial on claimable rows, in claim order', async () => {
      const [idx] = await db.query(
        `select pg_get_expr(i.indpred, i.indrelid) as predicate, pg_get_indexdef(i.indexrelid) as def
           from pg_index i where i.indexrelid = 'ai_runs_claim_idx'::regclass`,
      );
      expect(idx.predicate).toMatch(/status/);
      expect(idx.predicate).toMatch(/'pending'/);
      expect(idx.predicate).toMatch(/'waiting'/);
      expect(idx.predicate).not.toMatch(/'running'|'succeeded'|'failed'|'cancelled'|'dead_lettered'/);
      expect(idx.def).toMatch(/ON public\.ai_runs USING btree \(priority DESC, available_at\) WHERE/);
      const [{ tablename }] = await db.query(
        `select tablename from pg_indexes where indexname = 'ai_runs_claim_idx'`,
      );
      expect(tablename).toBe('ai_runs');
    });

    it('ai_events has an index on (run_id, id), in that order', async () => {
      const indexes = await db.query<{ name: string; cols: string[] }>(
        `select i.indexrelid::regclass::text as name,
                array(select a.attname from unnest(i.indkey) with ordinality k(attnum, ord)
                        join pg_attribute a on a.attrelid = i.indrelid and a.attnum = k.attnum
                       order by k.ord)::text[] as cols
           from pg_index i where i.indrelid = 'ai_events'::regclass`,
      );
      expect(indexes).toContainEqual({ name: 'ai_events_run_idx', cols: ['run_id', 'id'] });
      const [def] = await db.query(`select indexdef from pg_indexes where indexname = 'ai_events_run_idx'`);
      // ON ONLY: the index of the partitioned table (migration 1767000000000), one on each partition.
      expect(def.indexdef).toMatch(/ON (ONLY )?public\.ai_events USING btree \(run_id, id\)$/);
    });

    it('deleting a run deletes its checkpoints, commands, events and signals', async () => {
      const insertRun = async () =>
        (await db.query(`insert into ai_runs (kind, input) values ('k', '{}') returning id`))[0].id as string;
      const doomed = await insertRun();
      const kept = await insertRun();
      for (const id of [doomed, kept]) {
        await db.query(
          `insert into ai_checkpoints (run_id, step_index, step_name, output, epoch) values ($1, 0, 's', '1', 0)`,
          [id],
        );
        await db.query(
          `insert into ai_commands (idempotency_key, run_id, step_index, command_name, payload, epoch)
           values ($1, $2, 0, 'c', '{}', 0)`,
          [`cmd-${id}`, id],
        );
        await db.query(`insert into ai_events (run_id, event_type) values ($1, 'run.created')`, [id]);
        await db.query(`insert into ai_signals (run_id, name) values ($1, 'go')`, [id]);
      }
      const counts = async (id: string) =>
        Promise.all(
          ['ai_checkpoints', 'ai_commands', 'ai_events', 'ai_signals'].map(
            async (t) => (await db.query(`select count(*)::int as n from ${t} where run_id = $1`, [id]))[0].n,
          ),
        );
      expect(await counts(doomed)).toEqual([1, 1, 1, 1]);
      await db.query(`delete from ai_runs where id = $1`, [doomed]);
      expect(await counts(doomed)).toEqual([0, 0, 0, 0]);
      expect(await counts(kept)).toEqual([1, 1, 1, 1]);
    });
  });

  describe('two processes migrating the same fresh database at the same moment', () => {
    let db: TestDatabase;
    beforeAll(async () => {
      db = await createTestDatabase('migr_race');
    });
    afterAll(async () => {
      await db?.drop();
    });

    interface Migrator {
      proc: ChildProcess;
      out: () => string;
      err: () => string;
      ready: Promise<void>;
      exited: Promise<number | null>;
    }

    function startMigrator(): Migrator {
      const proc = spawn(process.execPath, ['-r', 'ts-node/register/transpile-only', FIXTURE], {
        cwd: ROOT,
        env: { ...process.env, DATABASE_URL: db.url },
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      let out = '';
      let err = '';
      proc.stderr!.on('data', (d) => (err += d));
      const ready = new Promise<void>((resolveReady, reject) => {
        proc.stdout!.on('data', (d) => {
          out += d;
          if (out.startsWith('ready\n')) resolveReady();
        });
        proc.once('exit', (code) => reject(new Error(`migrator exited (${code}) before ready: ${err}`)));
      });
      const exited = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
      return { proc, out: () => out, err: () => err, ready, exited };
    }

    it('both exit 0, exactly one applies the schema, and it exists once', async () => {
      const migrators = [startMigrator(), startMigrator()];
      try {
        await Promise.all(migrators.map((m) => m.ready));
        // Both are loaded and connected to nothing yet: release them together.
        for (const m of migrators) m.proc.stdin!.end('go\n');
        const codes = await Promise.all(migrators.map((m) => m.exited));
        expect({ codes, stderr: migrators.map((m) => m.err()) }).toEqual({ codes: [0, 0], stderr: ['', ''] });
      } finally {
        for (const m of migrators) if (m.proc.exitCode === null) m.proc.kill('SIGKILL');
      }
      const results = migrators.map((m) => JSON.parse(m.out().split('\n')[1]) as { applied: string[] });
      // The advisory lock serialised them: one applied everything, the other found nothing to do.
      expect(results.map((r) => r.applied).sort((a, b) => b.length - a.length)).toEqual([
        MIGRATION_NAMES,
        [],
      ]);
      expect(await existingTables(db)).toEqual([...TABLES, DURABLE_MIGRATIONS_TABLE].sort());
      expect(
        await db.query(
          `select name, count(*)::int as n from ${DURABLE_MIGRATIONS_TABLE} group by name order by name collate "C"`,
        ),
      ).toEqual(MIGRATION_NAMES.map((name) => ({ name, n: 1 })).sort((a, b) => (a.name < b.name ? -1 : 1)));
    }, 30_000);
  });

  describe("with the app's own TypeORM migrations (database.migrationsRun: false)", () => {
    let db: TestDatabase;
    beforeAll(async () => {
      ensureBuilt();
      db = await createTestDatabase('migr_app');
    }, 60_000);
    afterAll(async () => {
      await db?.drop();
    });

    const appMigrations = async () =>
      (await db.query<{ name: string }>(`select name from migrations order by id`)).map((r) => r.name);
    const migrationsTableExists = async () =>
      (await db.query(`select to_regclass($1) is not null as t`, [DURABLE_MIGRATIONS_TABLE]))[0].t as boolean;

    it("the app's DataSource applies DURABLE_EXECUTION_MIGRATIONS; the module boots with migrationsRun false and runs a workflow", async () => {
      const appDs = new DataSource({
        type: 'postgres',
        url: db.url,
        migrations: [CreateAppOrders1700000000000, ...DURABLE_EXECUTION_MIGRATIONS],
      });
      await appDs.initialize();
      try {
        const ran = await appDs.runMigrations({ transaction: 'each' });
        expect(ran.map((m) => m.name)).toEqual(['CreateAppOrders1700000000000', ...MIGRATION_NAMES]);
      } finally {
        await appDs.destroy();
      }
      // Recorded in the app's `migrations` table; the module's own table was never created.
      expect(await appMigrations()).toEqual(['CreateAppOrders1700000000000', ...MIGRATION_NAMES]);
      expect(await existingTables(db)).toEqual([...TABLES].sort());

      const app = await bootApp(db.url, [EchoWorkflow], { database: { url: db.url, migrationsRun: false } });
      try {
        const { run } = await app.get(RunRepository).start('migr-echo', { n: 1 });
        expect(await driveUntil(app, db, run.id)).toMatchObject({ status: 'succeeded', output: { n: 1 } });
      } finally {
        await app.close();
      }
      expect(await migrationsTableExists()).toBe(false);
    }, 30_000);

    it('migrationsRun left true on that schema fails boot with SchemaConflictError and writes nothing', async () => {
      const before = await existingTables(db);
      const err = await bootApp(db.url, [EchoWorkflow]).then(
        async (app) => {
          await app.close();
          return new Error('the app booted');
        },
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(SchemaConflictError);
      expect(err).toMatchObject({
        code: 'DURABLE_SCHEMA_CONFLICT',
        migrationsTable: DURABLE_MIGRATIONS_TABLE,
      });
      expect((err as Error).message).toContain('ai_runs');
      expect((err as Error).message).toContain('database.migrationsRun: false');
      // No empty ai_migrations left behind, the app's record untouched.
      expect(await existingTables(db)).toEqual(before);
      expect(await migrationsTableExists()).toBe(false);
      expect(await appMigrations()).toEqual(['CreateAppOrders1700000000000', ...MIGRATION_NAMES]);
    }, 30_000);

    it('an empty ai_migrations left by an older failed boot is no record either: the same error', async () => {
      await db.query(
        `create table ${DURABLE_MIGRATIONS_TABLE} (id serial primary key, "timestamp" bigint not null, name varchar not null)`,
      );
      try {
        await expect(runDurableMigrations({ type: 'postgres', url: db.url })).rejects.toMatchObject({
          code: 'DURABLE_SCHEMA_CONFLICT',
        });
        expect(await db.query(`select * from ${DURABLE_MIGRATIONS_TABLE}`)).toEqual([]);
      } finally {
        await db.query(`drop table ${DURABLE_MIGRATIONS_TABLE}`);
      }
    });

    it('the bin: migrate exits 1 with the same message, status lists pending with a note, revert has nothing', () => {
      const env = envWithout({ DATABASE_URL: db.url });
      const migrate = runCli(env, ['migrate']);
      expect(migrate.status).toBe(1);
      expect(migrate.stdout).toBe('');
      expect(migrate.stderr).toMatch(/^durable-execution migrate failed: The durable-execution tables .*\n$/);
      expect(migrate.stderr).toContain('database.migrationsRun: false');
      expect(migrate.stderr.split('\n')).toHaveLength(2);

      const status = runCli(env, ['status']);
      expect(status).toMatchObject({ status: 0, stderr: '' });
      const lines = status.stdout.trimEnd().split('\n');
      expect(lines.slice(0, MIGRATION_NAMES.length)).toEqual(MIGRATION_NAMES.map((n) => `pending  ${n}`));
      expect(lines[MIGRATION_NAMES.length]).toMatch(
        /^note: ai_runs, .* exist with no record in ai_migrations/,
      );

      expect(runCli(env, ['revert'])).toEqual({
        status: 0,
        stdout: 'durable-execution: nothing to revert\n',
        stderr: '',
      });
    }, 20_000);
  });

  describe('the bin (npx nestjs-durable-execution migrate | status | revert)', () => {
    let db: TestDatabase;
    beforeAll(async () => {
      // The bin runs from the build: build it when it is missing or older than its sources.
      ensureBuilt();
      db = await createTestDatabase('migr_cli');
    }, 60_000);
    afterAll(async () => {
      await db?.drop();
    });

    const statusLines = (applied: number) =>
      MIGRATION_NAMES.map((n, i) => `${i < applied ? 'applied' : 'pending'}  ${n}`).join('\n') + '\n';
    const ok = (stdout: string): CliResult => ({ status: 0, stdout, stderr: '' });

    it('package.json names a built file that starts with a node shebang; npm run migration:run uses it', () => {
      expect(PACKAGE.bin).toEqual({ 'nestjs-durable-execution': 'dist/src/cli/main.js' });
      expect(readFileSync(BIN, 'utf8').split('\n')[0]).toBe('#!/usr/bin/env node');
      expect(PACKAGE.scripts['migration:run']).toBe(
        `node ${PACKAGE.bin['nestjs-durable-execution']} migrate`,
      );
    });

    it('status, migrate, status, revert one at a time, and migrate again, with DATABASE_URL', async () => {
      const env = envWithout({ DATABASE_URL: db.url });
      expect(runCli(env, ['status'])).toEqual(ok(statusLines(0)));
      expect(runCli(env, ['migrate'])).toEqual(
        ok(`durable-execution: applied ${MIGRATION_NAMES.join(', ')}\n`),
      );
      expect(await existingTables(db)).toEqual([...TABLES, DURABLE_MIGRATIONS_TABLE].sort());
      expect(runCli(env, ['migrate'])).toEqual(ok('durable-execution: schema up to date\n'));
      expect(runCli(env, ['status'])).toEqual(ok(statusLines(MIGRATION_NAMES.length)));

      const last = MIGRATION_NAMES.length - 1;
      expect(runCli(env, ['revert'])).toEqual(ok(`durable-execution: reverted ${MIGRATION_NAMES[last]}\n`));
      expect(runCli(env, ['status'])).toEqual(ok(statusLines(last)));
      expect(runCli(env, ['revert'])).toEqual(
        ok(`durable-execution: reverted ${MIGRATION_NAMES[last - 1]}\n`),
      );
      expect(runCli(env, ['status'])).toEqual(ok(statusLines(last - 1)));
      expect(runCli(env, ['migrate'])).toEqual(
        ok(`durable-execution: applied ${MIGRATION_NAMES.slice(last - 1).join(', ')}\n`),
      );
      expect(runCli(env, ['status'])).toEqual(ok(statusLines(MIGRATION_NAMES.length)));
    }, 30_000);

    it('--url wins over DATABASE_URL (both spellings); revert --all reverts every one', async () => {
      const env = envWithout({ DATABASE_URL: 'postgres://root@127.0.0.1:1/nowhere' });
      expect(runCli(env, ['status', '--url', db.url])).toEqual(ok(statusLines(MIGRATION_NAMES.length)));
      expect(runCli(env, ['revert', '--all', `--url=${db.url}`])).toEqual(
        ok(`durable-execution: reverted ${[...MIGRATION_NAMES].reverse().join(', ')}\n`),
      );
      expect(await existingTables(db)).toEqual([DURABLE_MIGRATIONS_TABLE]);
      expect(runCli(env, ['revert', '--url', db.url])).toEqual(ok('durable-execution: nothing to revert\n'));
      expect(runCli(envWithout(), ['migrate', '--url', db.url]).status).toBe(0);
    }, 30_000);

    it('an unknown command, a missing one or an unknown option prints the usage on stderr and exits 2', () => {
      const env = envWithout({ DATABASE_URL: db.url });
      for (const args of [
        ['migrat'],
        [],
        ['status', '--verbose'],
        ['migrate', 'status'],
        ['status', '--all'],
      ]) {
        const res = runCli(env, args);
        expect({ args, status: res.status, stdout: res.stdout }).toEqual({ args, status: 2, stdout: '' });
        expect(res.stderr).toContain('Usage: nestjs-durable-execution <command>');
      }
      expect(runCli(env, ['migrat']).stderr).toMatch(/^nestjs-durable-execution: unknown command "migrat"\n/);
      const help = runCli(env, ['--help']);
      expect(help).toMatchObject({ status: 0, stderr: '' });
      expect(help.stdout).toContain('Usage: nestjs-durable-execution <command>');
    }, 20_000);

    it('exits 1 with a clear one-line message when no database is given or it cannot be reached', () => {
      for (const command of ['migrate', 'status', 'revert']) {
        const res = runCli(envWithout(), [command]);
        expect(res).toEqual({
          status: 1,
          stdout: '',
          stderr: `durable-execution ${command} failed: DATABASE_URL is not set: export the connection string of the target database, or pass --url\n`,
        });
      }
      const refused = runCli(envWithout({ DATABASE_URL: 'postgres://root@127.0.0.1:1/nowhere' }), ['status']);
      expect(refused).toEqual({
        status: 1,
        stdout: '',
        stderr: 'durable-execution status failed: connect ECONNREFUSED 127.0.0.1:1\n',
      });
      const missing = runCli(envWithout(), ['migrate', '--url', `${db.url}_missing`]);
      expect(missing.status).toBe(1);
      expect(missing.stderr).toBe(
        `durable-execution migrate failed: database "${db.name}_missing" does not exist\n`,
      );
    }, 20_000);

    it('the older dist/src/cli/migrate.js still applies, and reverts everything with --revert', async () => {
      const env = envWithout({ DATABASE_URL: db.url });
      expect(runCli(env, [], LEGACY_CLI)).toEqual(ok('durable-execution: schema up to date\n'));
      expect(runCli(env, ['--revert'], LEGACY_CLI)).toEqual(
        ok(`durable-execution: reverted ${[...MIGRATION_NAMES].reverse().join(', ')}\n`),
      );
      expect(await existingTables(db)).toEqual([DURABLE_MIGRATIONS_TABLE]);
      expect(runCli(env, [], LEGACY_CLI)).toEqual(
        ok(`durable-execution: applied ${MIGRATION_NAMES.join(', ')}\n`),
      );
    }, 20_000);
  });
});
