import { ChildProcess, execFileSync, execSync, spawn } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import {
  DURABLE_EXECUTION_MIGRATIONS,
  DURABLE_MIGRATIONS_TABLE,
  revertDurableMigrations,
  runDurableMigrations,
} from '../../src';
import { Client } from 'pg';
import { MIGRATION_LOCK_KEY } from '../../src/durable-execution.constants';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';

const ROOT = resolve(__dirname, '../..');
const CLI = join(ROOT, 'dist/src/cli/migrate.js');
const FIXTURE = join(ROOT, 'test/fixtures/migrate-concurrently.ts');
const TABLES = ['ai_runs', 'ai_checkpoints', 'ai_commands', 'ai_events', 'ai_signals'];
const MIGRATION_NAMES = DURABLE_EXECUTION_MIGRATIONS.map((m) => m.name);

/** Which of the module's tables exist (plus its migrations table), by name. */
async function existingTables(db: TestDatabase): Promise<string[]> {
  const rows = await db.query<{ table_name: string }>(
    `select table_name from information_schema.tables
      where table_schema = 'public' and table_name like 'ai\\_%' order by table_name`,
  );
  return rows.map((r) => r.table_name);
}

/** Expects `fn` to fail with the PostgreSQL error `code` (e.g. 23514 check_violation). */
async function expectPgError(fn: () => Promise<unknown>, code: string): Promise<void> {
  await expect(fn()).rejects.toMatchObject({ code });
}

/** The source files the CLI in dist is compiled from: rebuild when one is newer than the build. */
function distIsStale(): boolean {
  if (!existsSync(CLI)) return true;
  const built = statSync(CLI).mtimeMs;
  const sources = [
    'src/cli/migrate.ts',
    'src/persistence/run-migrations.ts',
    'src/durable-execution.constants.ts',
    ...readdirSync(join(ROOT, 'migrations')).map((f) => `migrations/${f}`),
  ];
  return sources.some((f) => statSync(join(ROOT, f)).mtimeMs > built);
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

    it('ai_checkpoints, ai_commands, ai_events and ai_signals reference ai_runs(id) ON DELETE CASCADE', async () => {
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
           from pg_constraint c where c.contype = 'f' order by child`,
      );
      expect(fks).toEqual(
        ['ai_checkpoints', 'ai_commands', 'ai_events', 'ai_signals'].map((child) => ({
          child,
          parent: 'ai_runs',
          on_delete: 'c',
          cols: 'run_id',
          ref_cols: 'id',
        })),
      );
      // information_schema agrees on the rule.
      const rules = await db.query(
        `select tc.table_name, rc.delete_rule from information_schema.referential_constraints rc
           join information_schema.table_constraints tc on tc.constraint_name = rc.constraint_name
          order by tc.table_name`,
      );
      expect(rules.map((r) => r.delete_rule)).toEqual(['CASCADE', 'CASCADE', 'CASCADE', 'CASCADE']);
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
      expect(def.indexdef).toMatch(/ON public\.ai_events USING btree \(run_id, id\)$/);
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
          `select name, count(*)::int as n from ${DURABLE_MIGRATIONS_TABLE} group by name order by name`,
        ),
      ).toEqual(MIGRATION_NAMES.map((name) => ({ name, n: 1 })).sort((a, b) => a.name.localeCompare(b.name)));
    }, 30_000);
  });

  describe('the migrate CLI (dist/src/cli/migrate.js)', () => {
    let db: TestDatabase;
    beforeAll(async () => {
      // The CLI runs from the build: build it when it is missing or older than its sources.
      if (distIsStale()) execSync('npm run build', { cwd: ROOT, stdio: 'pipe' });
      db = await createTestDatabase('migr_cli');
    }, 60_000);
    afterAll(async () => {
      await db?.drop();
    });

    const cli = (env: NodeJS.ProcessEnv, ...args: string[]) =>
      execFileSync(process.execPath, [CLI, ...args], { cwd: ROOT, env, encoding: 'utf8', stdio: 'pipe' });

    it('applies the schema, then reports it up to date, then reverts it', async () => {
      expect(existsSync(CLI)).toBe(true);
      const env = { ...process.env, DATABASE_URL: db.url };
      expect(cli(env)).toBe(`durable-execution: applied ${MIGRATION_NAMES.join(', ')}\n`);
      expect(await existingTables(db)).toEqual([...TABLES, DURABLE_MIGRATIONS_TABLE].sort());
      expect(cli(env)).toBe('durable-execution: schema up to date\n');
      expect(cli(env, '--revert')).toBe('durable-execution: all migrations reverted\n');
      expect(await existingTables(db)).toEqual([DURABLE_MIGRATIONS_TABLE]);
    }, 20_000);

    it('exits 1 with a clear message when DATABASE_URL is not set', () => {
      const env = { ...process.env };
      delete env.DATABASE_URL;
      let failure: { status?: number; stderr?: string } | undefined;
      try {
        cli(env);
      } catch (err) {
        failure = err as { status?: number; stderr?: string };
      }
      expect(failure?.status).toBe(1);
      expect(failure?.stderr).toContain('DATABASE_URL is not set');
    }, 20_000);
  });
});
