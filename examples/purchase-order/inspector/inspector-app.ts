/**
 * The run inspector on its own: `DurableAdminModule` over a database the demo has filled, with no worker
 * and no reconciler (nothing runs any more; this process only reads, and acts if an operator asks).
 * `npm run demo -- --inspect` and `--screenshot` serve it after the rolling deploy.
 */
import { DynamicModule, INestApplication, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { DurableExecutionModule } from '../../../src'; // in an app: 'nestjs-durable-execution'
import { DurableAdminModule } from '../../../src/admin'; // in an app: 'nestjs-durable-execution/admin'
import { ADMIN_PATH, type DemoAdminAccess } from './admin-access';

/**
 * `DurableAdminModule` as the demo mounts it: at `/durable`, guarded as `access` says, with the library's
 * sign-in page (`/durable/login`) when there is a key, since a browser cannot send `x-api-key` by itself.
 */
export function demoAdminModule(access: DemoAdminAccess): DynamicModule {
  return DurableAdminModule.forRoot({ path: ADMIN_PATH, ...access.options, login: access.key !== null });
}

export async function createInspectorApp(opts: {
  databaseUrl: string;
  access: DemoAdminAccess;
}): Promise<INestApplication> {
  @Module({
    imports: [
      DurableExecutionModule.forRoot({
        database: { url: opts.databaseUrl, poolSize: 4 },
        worker: { enabled: false },
        reconciler: { enabled: false },
      }),
      demoAdminModule(opts.access),
    ],
  })
  class DemoInspectorModule {}

  const app = await NestFactory.create(DemoInspectorModule, { logger: ['error', 'warn'] });
  await app.init();
  return app;
}
