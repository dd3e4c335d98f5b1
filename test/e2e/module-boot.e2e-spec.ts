import { INestApplication, Injectable, Module, ModuleMetadata } from '@nestjs/common';
import { getDataSourceToken, TypeOrmModule } from '@nestjs/typeorm';
import { Client } from 'pg';
import { Column, DataSource, Entity, PrimaryGeneratedColumn } from 'typeorm';
import {
  CheckpointService,
  CommandGateway,
  DurableExecutionModule,
  DurableExecutionModuleOptions,
  DurableWorkflow,
  InvalidOptionsError,
  LeaseService,
  RunRepository,
} from '../../src';
import { DurableWorker } from '../../src/engine/worker.service';
import { DurableDatabase } from '../../src/store/durable-database';
import { bootError as bootErrorWith, bootModules } from '../helpers/app';
import { createTestDatabase, serverUrl, TestDatabase } from '../helpers/database';

@DurableWorkflow('boot-echo')
class EchoWorkflow {
  async run(input: unknown) {
    return input;
  }
}

@Entity('boot_notes')
class BootNote {
  @PrimaryGeneratedColumn() id!: number;
  @Column() text!: string;
}

/** Timers off: these tests look at wiring, not at the worker loop. */
const OFF = { worker: { enabled: false }, reconciler: { enabled: false } } as const;

let db: TestDatabase;

/** Holds the url and builds module options, as an app's config service would. */
@Injectable()
class DurableConfig {
  static instances = 0;
  constructor() {
    DurableConfig.instances++;
  }
  createDurableExecutionOptions(): DurableExecutionModuleOptions {
    return {
      database: { url: db.url },
      worker: { enabled: false, workerId: 'via-use-existing' },
      reconciler: OFF.reconciler,
    };
  }
}

@Module({ providers: [DurableConfig], exports: [DurableConfig] })
class ConfigModule {}

/** A `useClass` options factory with a dependency of its own from an imported module. */
@Injectable()
class OptionsFactory {
  constructor(private readonly config: DurableConfig) {}
  createDurableExecutionOptions(): DurableExecutionModuleOptions {
    const options = this.config.createDurableExecutionOptions();
    return { ...options, worker: { enabled: false, workerId: 'via-use-class' } };
  }
}

const boot = (imports: ModuleMetadata['imports'], providers = [EchoWorkflow]): Promise<INestApplication> =>
  bootModules({ imports, providers });

/** Boots expecting a failure and returns the error (closing the app if it booted after all). */
const bootError = (imports: ModuleMetadata['imports']) =>
  bootErrorWith({ imports, providers: [EchoWorkflow] });

/** The four public providers resolve, and a run starts and lands in the record. */
async function expectWorking(app: INestApplication, target: TestDatabase): Promise<RunRepository> {
  expect(app.get(RunRepository)).toBeInstanceOf(RunRepository);
  expect(app.get(CheckpointService)).toBeInstanceOf(CheckpointService);
  expect(app.get(CommandGateway)).toBeInstanceOf(CommandGateway);
  expect(app.get(LeaseService)).toBeInstanceOf(LeaseService);
  const runs = app.get(RunRepository);
  const marker = Math.random().toString(36).slice(2);
  const { run, created } = await runs.start('boot-echo', { marker });
  expect(created).toBe(true);
  expect(run).toMatchObject({ kind: 'boot-echo', status: 'pending', input: { marker } });
  const rows = await target.query(`select kind, status, input from ai_runs where id = $1`, [run.id]);
  expect(rows).toEqual([{ kind: 'boot-echo', status: 'pending', input: { marker } }]);
  return runs;
}

/** Client backends connected to `dbName` (our own admin connection is on another database). */
async function backends(dbName: string): Promise<{ application_name: string }[]> {
  const c = new Client({ connectionString: serverUrl() });
  await c.connect();
  try {
    const res = await c.query(
      `select application_name from pg_stat_activity where datname = $1 and backend_type = 'client backend'`,
      [dbName],
    );
    return res.rows;
  } finally {
    await c.end();
  }
}

/**
 * Polls the application names of the backends on `dbName` until `ok` holds or `timeoutMs` passes, and
 * returns the last list (a backend exits a moment after its client hangs up, so one look could lie).
 */
async function waitForBackends(
  dbName: string,
  ok: (applicationNames: string[]) => boolean,
  timeoutMs = 3000,
): Promise<string[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const names = (await backends(dbName)).map((b) => b.application_name);
    if (ok(names) || Date.now() > deadline) return names;
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('DurableExecutionModule boot', () => {
  beforeAll(async () => {
    db = await createTestDatabase('boot');
  });
  afterAll(async () => {
    await db?.drop();
  });

  describe('forRoot', () => {
    it('boots with { database: { url } }, resolves the providers and starts a run', async () => {
      const app = await boot([DurableExecutionModule.forRoot({ database: { url: db.url }, ...OFF })]);
      try {
        await expectWorking(app, db);
        expect(app.get(DurableDatabase).dataSource.options).toMatchObject({ type: 'postgres', url: db.url });
      } finally {
        await app.close();
      }
    });

    it('destroys the DataSource it created when the app closes: its connections go away', async () => {
      const own = await createTestDatabase('boot_own');
      try {
        const app = await boot([DurableExecutionModule.forRoot({ database: { url: own.url }, ...OFF })]);
        const ds = app.get(DurableDatabase).dataSource;
        await expectWorking(app, own);
        expect((await waitForBackends(own.name, (n) => n.length > 0)).length).toBeGreaterThan(0);
        await app.close();
        expect(ds.isInitialized).toBe(false);
        expect(await waitForBackends(own.name, (n) => n.length === 0)).toEqual([]);
      } finally {
        await own.drop();
      }
    });

    it('destroys the DataSource it created when boot fails, so a failed boot leaves no connection', async () => {
      const broken = await createTestDatabase('boot_broken');
      try {
        // A table in the way: the module refuses to migrate (SchemaConflictError) after its DataSource connected.
        await broken.query(`create table ai_runs (id int)`);
        const err = await bootError([
          DurableExecutionModule.forRoot({ database: { url: broken.url }, ...OFF }),
        ]);
        expect(err).toMatchObject({ code: 'DURABLE_SCHEMA_CONFLICT' });
        expect(await waitForBackends(broken.name, (n) => n.length === 0)).toEqual([]);
      } finally {
        await broken.drop();
      }
    });
  });

  describe('forRootAsync', () => {
    it('useFactory with imports and inject of a provider from another module', async () => {
      const seen: unknown[] = [];
      const app = await boot([
        DurableExecutionModule.forRootAsync({
          imports: [ConfigModule],
          inject: [DurableConfig],
          useFactory: async (config: DurableConfig) => {
            seen.push(config);
            return {
              ...config.createDurableExecutionOptions(),
              worker: { enabled: false, workerId: 'via-factory' },
            };
          },
        }),
      ]);
      try {
        await expectWorking(app, db);
        expect(seen).toHaveLength(1);
        expect(seen[0]).toBeInstanceOf(DurableConfig);
        expect(seen[0]).toBe(app.get(DurableConfig));
        expect(app.get(DurableWorker).id).toBe('via-factory');
      } finally {
        await app.close();
      }
    });

    it('useClass: instantiates the factory class (with its own dependencies) and uses its options', async () => {
      const app = await boot([
        DurableExecutionModule.forRootAsync({ imports: [ConfigModule], useClass: OptionsFactory }),
      ]);
      try {
        await expectWorking(app, db);
        expect(app.get(DurableWorker).id).toBe('via-use-class');
      } finally {
        await app.close();
      }
    });

    it('useExisting: uses the imported provider itself, creating no second instance', async () => {
      const before = DurableConfig.instances;
      const app = await boot([
        DurableExecutionModule.forRootAsync({ imports: [ConfigModule], useExisting: DurableConfig }),
      ]);
      try {
        await expectWorking(app, db);
        expect(app.get(DurableWorker).id).toBe('via-use-existing');
        expect(DurableConfig.instances - before).toBe(1);
      } finally {
        await app.close();
      }
    });
  });

  describe("reusing the app's TypeORM DataSource", () => {
    it("dataSourceName 'default': uses @nestjs/typeorm's DataSource, opens no pool of its own, leaves the app's schema alone", async () => {
      const shared = await createTestDatabase('boot_typeorm');
      try {
        const app = await boot([
          TypeOrmModule.forRoot({
            type: 'postgres',
            url: shared.url,
            applicationName: 'app-pool',
            entities: [BootNote],
            synchronize: true,
            // Common in test setups; the module's migration must not repeat it on the app's schema.
            dropSchema: true,
          }),
          DurableExecutionModule.forRoot({ database: { dataSourceName: 'default' }, ...OFF }),
        ]);
        try {
          const appDs = app.get<DataSource>(getDataSourceToken());
          expect(appDs).toBeInstanceOf(DataSource);
          expect(app.get(DurableDatabase).dataSource).toBe(appDs);
          await expectWorking(app, shared);
          // The app's table (made by synchronize) survived the module's migration run.
          await appDs.getRepository(BootNote).save({ text: 'still here' });
          expect(await shared.query(`select text from boot_notes`)).toEqual([{ text: 'still here' }]);
          // Every connection on the database is the app's pool: the module made none of its own.
          // (Polled: the test's own short-lived client may linger a moment after it hung up.)
          const onlyApp = (names: string[]) => names.length > 0 && names.every((n) => n === 'app-pool');
          const names = await waitForBackends(shared.name, onlyApp);
          expect(names.length).toBeGreaterThan(0);
          expect(new Set(names)).toEqual(new Set(['app-pool']));
        } finally {
          await app.close();
        }
      } finally {
        await shared.drop();
      }
    });

    it('dataSourceName of a named @nestjs/typeorm DataSource', async () => {
      const app = await boot([
        TypeOrmModule.forRoot({ name: 'durable', type: 'postgres', url: db.url }),
        DurableExecutionModule.forRoot({ database: { dataSourceName: 'durable' }, ...OFF }),
      ]);
      try {
        const named = app.get<DataSource>(getDataSourceToken('durable'));
        expect(named).toBeInstanceOf(DataSource);
        expect(app.get(DurableDatabase).dataSource).toBe(named);
        await expectWorking(app, db);
      } finally {
        await app.close();
      }
    });

    it('refuses a dataSourceName nothing registered, saying what to do', async () => {
      const err = await bootError([
        DurableExecutionModule.forRoot({ database: { dataSourceName: 'missing' }, ...OFF }),
      ]);
      expect(err).toBeInstanceOf(InvalidOptionsError);
      expect(err).toMatchObject({ code: 'DURABLE_INVALID_OPTIONS' });
      expect((err as Error).message).toContain(
        "database.dataSourceName: no TypeORM DataSource named 'missing' is registered",
      );
    });

    it('forRootAsync injecting the DataSource: uses that instance', async () => {
      const app = await boot([
        TypeOrmModule.forRoot({ type: 'postgres', url: db.url }),
        DurableExecutionModule.forRootAsync({
          inject: [DataSource],
          useFactory: (ds: DataSource) => ({ database: { dataSource: ds }, ...OFF }),
        }),
      ]);
      try {
        const appDs = app.get(DataSource);
        expect(app.get(DurableDatabase).dataSource).toBe(appDs);
        await expectWorking(app, db);
      } finally {
        await app.close();
      }
    });

    it('never destroys a DataSource it was given: it stays usable after the app closes', async () => {
      const mine = new DataSource({ type: 'postgres', url: db.url, applicationName: 'mine' });
      await mine.initialize();
      try {
        const app = await boot([
          DurableExecutionModule.forRootAsync({
            useFactory: () => ({ database: { dataSource: mine }, ...OFF }),
          }),
        ]);
        const runs = await expectWorking(app, db);
        expect(app.get(DurableDatabase).dataSource).toBe(mine);
        const { run } = await runs.start('boot-echo', { via: 'mine' });
        await app.close();
        expect(mine.isInitialized).toBe(true);
        // Still a working pool, not just a flag.
        expect(await mine.query(`select kind from ai_runs where id = $1`, [run.id])).toEqual([
          { kind: 'boot-echo' },
        ]);
      } finally {
        await mine.destroy();
      }
      expect(mine.isInitialized).toBe(false);
    });

    it('initialises a given DataSource that is not yet initialised, and still leaves it to its owner', async () => {
      const mine = new DataSource({ type: 'postgres', url: db.url });
      try {
        const app = await boot([DurableExecutionModule.forRoot({ database: { dataSource: mine }, ...OFF })]);
        expect(mine.isInitialized).toBe(true);
        await expectWorking(app, db);
        await app.close();
        expect(mine.isInitialized).toBe(true);
        expect(await mine.query(`select 1 as one`)).toEqual([{ one: 1 }]);
      } finally {
        if (mine.isInitialized) await mine.destroy();
      }
    });
  });

  describe('invalid options fail boot with InvalidOptionsError', () => {
    async function expectInvalid(imports: ModuleMetadata['imports'], fragments: string[]): Promise<void> {
      const err = await bootError(imports);
      expect(err).toBeInstanceOf(InvalidOptionsError);
      expect(err).toMatchObject({ code: 'DURABLE_INVALID_OPTIONS' });
      for (const fragment of fragments) expect((err as Error).message).toContain(fragment);
    }

    it('names every bad worker field and why', async () => {
      await expectInvalid(
        [
          DurableExecutionModule.forRoot({
            database: { url: db.url },
            worker: { enabled: false, heartbeatMs: 40_000, leaseTtlMs: 30_000, concurrency: 0 },
            reconciler: OFF.reconciler,
          }),
        ],
        [
          'worker.heartbeatMs: must be below worker.leaseTtlMs (30000)',
          'got 40000',
          'worker.concurrency: concurrency must not be less than 1',
        ],
      );
    });

    it('missing database', async () => {
      await expectInvalid(
        [DurableExecutionModule.forRoot({ ...OFF } as unknown as DurableExecutionModuleOptions)],
        ['database: database is required: give { url } or { dataSourceName } or { dataSource }'],
      );
    });

    it('both url and dataSourceName', async () => {
      await expectInvalid(
        [DurableExecutionModule.forRoot({ database: { url: db.url, dataSourceName: 'default' }, ...OFF })],
        ['database: give exactly one of url, dataSourceName or dataSource; got url and dataSourceName'],
      );
    });

    it('from a forRootAsync factory too', async () => {
      await expectInvalid(
        [
          DurableExecutionModule.forRootAsync({
            useFactory: async () =>
              ({ database: { url: db.url }, worker: { enabled: false, concurency: 4 } }) as never,
          }),
        ],
        ['worker.concurency: unknown option'],
      );
    });
  });
});
