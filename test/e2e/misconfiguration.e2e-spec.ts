import { Injectable, LoggerService } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import {
  DurableStep,
  DurableWorkflow,
  DurableExecutionModule,
  DurableExecutionModuleOptions,
  InvalidOptionsError,
  SchemaNotReadyError,
} from '../../src';
import { runDurableMigrations } from '../../src/migrations';
import { bootError, bootModules } from '../helpers/app';
import { createTestDatabase, serverUrl, TestDatabase, withDatabase } from '../helpers/database';

/**
 * Issue 20, item 5: configurations that can never work fail at boot with a message that says what to
 * do, instead of a raw PostgreSQL error at the first request or five "not reachable" retries.
 */

@Injectable()
class PricingSteps {
  @DurableStep({ name: 'quote_price' })
  async quote(sku: string) {
    return { sku, cents: 100 };
  }
}

@DurableWorkflow('pricing')
class PricingWorkflow {
  async run() {
    return 'priced';
  }
}

const boot = (options: DurableExecutionModuleOptions) =>
  bootError({ imports: [DurableExecutionModule.forRoot(options)] });
const off = { worker: { enabled: false }, reconciler: { enabled: false } } as const;

describe('no silent misconfiguration', () => {
  let db: TestDatabase;
  beforeEach(async () => {
    db = await createTestDatabase('misconf');
  });
  afterEach(async () => {
    await db.drop();
  });

  it('migrations not applied (migrationsRun: false, empty database): the boot fails naming the command', async () => {
    const err = await boot({ database: { url: db.url, migrationsRun: false }, ...off });
    expect(err).toBeInstanceOf(SchemaNotReadyError);
    expect(err).toMatchObject({ code: 'DURABLE_SCHEMA_NOT_READY', schema: 'public' });
    const message = (err as Error).message;
    expect(message).toContain('missing: ai_runs, ai_checkpoints');
    expect(message).toContain('npx nestjs-durable-execution migrate');
    expect(message).toContain('DURABLE_EXECUTION_MIGRATIONS');
  });

  it('a schema behind the package: the missing column is named', async () => {
    await runDurableMigrations({ type: 'postgres', url: db.url });
    await db.query(`alter table ai_runs drop column notify_on_finish`);
    const err = await boot({ database: { url: db.url, migrationsRun: false }, ...off });
    expect((err as Error).message).toContain('missing: ai_runs.notify_on_finish');
  });

  it('a schema that is there: the boot goes on (the module applies nothing)', async () => {
    await runDurableMigrations({ type: 'postgres', url: db.url });
    const app = await bootModules({
      imports: [DurableExecutionModule.forRoot({ database: { url: db.url, migrationsRun: false }, ...off })],
    });
    await app.close();
  });

  it('a database that does not exist fails at once, with its reason, not after five retries', async () => {
    const t0 = Date.now();
    const err = await boot({ database: { url: withDatabase(serverUrl(), `${db.name}_nope`) }, ...off });
    expect(err).toBeInstanceOf(InvalidOptionsError);
    expect((err as Error).message).toMatch(/the database does not exist.*does not exist/);
    expect(Date.now() - t0).toBeLessThan(2000); // the first retry alone would wait 600 ms, five of them 18 s
  });

  it('a role that may not connect fails at once', async () => {
    const u = new URL(db.url);
    u.username = 'no_such_role_x';
    const err = await boot({ database: { url: u.toString() }, ...off });
    expect(err).toBeInstanceOf(InvalidOptionsError);
    // Trust auth refuses an unknown role outright (28000); password auth (an embedded PostgreSQL, most
    // managed servers) asks for its password first and refuses that (28P01): the server never says which.
    const refused = (err as Error).message.match(/the role may not connect|the password was refused/)?.[0];
    const trust =
      (
        await db.query(
          `select count(*)::int as n from pg_hba_file_rules where type like 'host%' and auth_method = 'trust'`,
        )
      )[0].n > 0;
    expect(refused).toBe(trust ? 'the role may not connect' : 'the password was refused');
  });

  it('a URL that is not postgres fails before connecting, without quoting it', async () => {
    const err = await boot({ database: { url: 'mysql://app:hunter2@db:3306/app' }, ...off });
    expect(err).toBeInstanceOf(InvalidOptionsError);
    expect((err as Error).message).toContain(
      'database.url: must be a postgres:// or postgresql:// URL; got mysql://',
    );
    expect((err as Error).message).not.toContain('hunter2');
    const notUrl = await boot({ database: { url: 'localhost:5432/app' }, ...off });
    expect((notUrl as Error).message).toContain('database.url: ');
  });

  it('a worker in a process that never calls enableShutdownHooks() is warned about, once', async () => {
    await runDurableMigrations({ type: 'postgres', url: db.url });
    const lines: string[] = [];
    const logger: LoggerService = {
      log: () => undefined,
      error: () => undefined,
      warn: (m: unknown) => void lines.push(String(m)),
    };
    // Jest itself may listen for SIGTERM: take its listeners away while the check runs.
    const listeners = process.listeners('SIGTERM');
    process.removeAllListeners('SIGTERM');
    const app = await bootModules(
      {
        imports: [
          DurableExecutionModule.forRoot({ database: { url: db.url }, worker: { pollIntervalMs: 1000 } }),
        ],
      },
      logger as never,
    );
    try {
      await new Promise((r) => setTimeout(r, 2300));
      expect(lines.filter((l) => l.includes('enableShutdownHooks()'))).toHaveLength(1);
      // With the hooks on, no warning.
      lines.length = 0;
      const hooked = await bootModules(
        {
          imports: [
            DurableExecutionModule.forRoot({ database: { url: db.url }, worker: { pollIntervalMs: 1000 } }),
          ],
        },
        logger as never,
      );
      hooked.enableShutdownHooks();
      await new Promise((r) => setTimeout(r, 2300));
      await hooked.close();
      expect(lines.filter((l) => l.includes('enableShutdownHooks()'))).toEqual([]);
    } finally {
      await app.close();
      for (const l of listeners) process.on('SIGTERM', l as never);
    }
  });

  it('a durable provider replaced by a value in a test (overrideProvider(...).useValue) is said loudly at boot', async () => {
    await runDurableMigrations({ type: 'postgres', url: db.url });
    const lines: string[] = [];
    const logger: LoggerService = {
      log: () => undefined,
      error: () => undefined,
      warn: (m: unknown) => void lines.push(String(m)),
    };
    const moduleRef = await Test.createTestingModule({
      imports: [DurableExecutionModule.forRoot({ database: { url: db.url }, ...off })],
      providers: [PricingSteps, PricingWorkflow],
    })
      .overrideProvider(PricingSteps)
      .useValue({ quote: async () => ({ sku: 'x', cents: 1 }) })
      .overrideProvider(PricingWorkflow)
      .useValue({ run: async () => 'mocked' })
      .compile();
    const app = moduleRef.createNestApplication({ logger });
    await app.init();
    try {
      expect(lines).toContainEqual(
        expect.stringMatching(
          /^PricingSteps is provided as a value .*: quote is a plain call now, not durable/,
        ),
      );
      expect(lines).toContainEqual(
        expect.stringMatching(
          /^PricingWorkflow \(@DurableWorkflow\('pricing'\)\) is provided as a value .*: it is not registered/,
        ),
      );
    } finally {
      await app.close();
    }
  });
});
