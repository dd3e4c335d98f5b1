/**
 * The demo as a service: a small Nest HTTP app that uses the module the way an application would.
 * One process serves the API and runs a worker; scale out by running more of them (or API-only pods
 * with `worker: { enabled: false }`). It mounts `DurableAdminModule` too: the run inspector at
 * `/durable` and the admin API at `/durable/api`, behind the library's `ApiKeyAdminGuard`
 * (see ../inspector/admin-access.ts for where the key comes from).
 */
import { BadRequestException, INestApplication, Module, ValidationPipe } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { ValidationError } from 'class-validator';
import { DurableExecutionModule } from '../../../src'; // in an app: 'nestjs-durable-execution'
import { ensureAccountTables } from '../accounts';
import type { ServiceSettings } from '../config';
import { demoAdminAccess, type DemoAdminAccess } from '../inspector/admin-access';
import { demoAdminModule } from '../inspector/inspector-app';
import { durableOptions, PurchaseOrderModule } from '../purchase-order.module';
import { OrdersController } from './orders.controller';

export interface OrdersAppOptions {
  databaseUrl: string;
  services: ServiceSettings;
  timeScaleMs: number;
  /** Drive runs in this process too. Default true. */
  worker?: boolean;
  /** Who may use the run inspector and admin API. Default: `demoAdminAccess()` (from the environment). */
  admin?: DemoAdminAccess;
}

/** 400 with one entry per invalid field: `{ statusCode, message, errors: [{ field, messages }] }`. */
export function validationPipe(): ValidationPipe {
  return new ValidationPipe({
    whitelist: true,
    forbidNonWhitelisted: true,
    exceptionFactory: (errors: ValidationError[]) =>
      new BadRequestException({
        statusCode: 400,
        message: 'Validation failed',
        errors: errors.map((e) => ({ field: e.property, messages: Object.values(e.constraints ?? {}) })),
      }),
  });
}

export async function createOrdersApp(opts: OrdersAppOptions): Promise<INestApplication> {
  const admin = opts.admin ?? demoAdminAccess();
  await ensureAccountTables(opts.databaseUrl); // the app's own tables (step 7 writes them), as a migration would
  @Module({
    imports: [
      DurableExecutionModule.forRoot(
        durableOptions({
          databaseUrl: opts.databaseUrl,
          timeScaleMs: opts.timeScaleMs,
          worker: opts.worker ?? true,
          concurrency: 50,
        }),
      ),
      PurchaseOrderModule.register(opts.services),
      demoAdminModule(admin),
    ],
    controllers: [OrdersController],
  })
  class OrdersAppModule {}

  const app = await NestFactory.create(OrdersAppModule, { logger: ['error', 'warn'] });
  app.useGlobalPipes(validationPipe());
  await app.init();
  return app;
}
