import {
  DynamicModule,
  INestApplication,
  ModuleMetadata,
  NestApplicationOptions,
  Type,
} from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { DurableExecutionModule, DurableExecutionModuleOptions } from '../../src';
import { throughPgBouncer } from '../pgbouncer/route';

type Logger = NestApplicationOptions['logger'];

/**
 * `DurableExecutionModule.forRoot` on the database at `url`. The worker and reconciler timers are off by
 * default (tests drive `worker.tick()` and `reconciler.sweep()` directly); pass `worker: { enabled: true }`
 * for the real schedule. With DURABLE_TEST_PGBOUNCER set, the pool goes through PgBouncer
 * (test/pgbouncer/route.ts).
 */
export function durableModule(
  url: string,
  options: Partial<DurableExecutionModuleOptions> = {},
): DynamicModule {
  return DurableExecutionModule.forRoot({
    ...options,
    database: throughPgBouncer({ url, ...options.database }),
    worker: { enabled: false, ...options.worker },
    reconciler: { enabled: false, ...options.reconciler },
  });
}

/** Boots a Nest app from module metadata as given (for tests of the wiring itself: forRootAsync, TypeORM). */
export async function bootModules(
  metadata: ModuleMetadata,
  logger: Logger = ['error'],
): Promise<INestApplication> {
  const moduleRef = await Test.createTestingModule(metadata).compile();
  const app = moduleRef.createNestApplication({ logger });
  await app.init();
  return app;
}

/** Boots expecting a failure and returns the error (closing the app if it booted after all). */
export async function bootError(metadata: ModuleMetadata): Promise<unknown> {
  let app: INestApplication | undefined;
  try {
    app = await bootModules(metadata, false);
  } catch (err) {
    return err;
  }
  await app.close();
  throw new Error('the app booted');
}

/** Boots a Nest app with the module for a test (timers off by default, as `durableModule`). */
export async function bootApp(
  url: string,
  providers: Type<unknown>[] = [],
  options: Partial<DurableExecutionModuleOptions> = {},
  controllers: Type<unknown>[] = [],
): Promise<INestApplication> {
  return bootModules({ imports: [durableModule(url, options)], providers, controllers });
}

/** What an HTTP test app is made of besides the module on its database. */
export interface HttpAppParts {
  providers?: ModuleMetadata['providers'];
  controllers?: Type<unknown>[];
  /** Modules imported next to the durable module: DurableAdminModule, DurableObservabilityModule. */
  imports?: ModuleMetadata['imports'];
  /** Options of the durable module (timers off unless these turn them on, as `durableModule`). */
  options?: Partial<DurableExecutionModuleOptions>;
  /** Nest's logger; errors only by default. */
  logger?: Logger;
}

/** Boots a Nest app with the module, listening on a free port of 127.0.0.1; `http` is its base URL. */
export async function bootHttpApp(
  url: string,
  parts: HttpAppParts = {},
): Promise<{ app: INestApplication; http: string }> {
  const moduleRef = await Test.createTestingModule({
    imports: [durableModule(url, parts.options), ...(parts.imports ?? [])],
    providers: parts.providers,
    controllers: parts.controllers,
  }).compile();
  const app = moduleRef.createNestApplication({ logger: parts.logger ?? ['error'] });
  await app.listen(0, '127.0.0.1');
  return { app, http: await app.getUrl() };
}
