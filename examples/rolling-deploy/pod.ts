/**
 * One worker pod of the rolling-deploy example: the module with a worker and a reconciler, registering
 * the versions POD_VERSIONS names (`1`: the old build; `1,2`: the new build, which keeps the v1 class
 * until no run holds it). Env: DB_URL, POD_ID, POD_VERSIONS, FULFIL_MS. SIGTERM drains it (runs in a
 * step finish it or are handed on); SIGKILL is a lost node.
 */
import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { DurableExecutionModule } from '../../src';
import { OrderSteps, OrderV1, OrderV2 } from './order.workflows';

const versions = (process.env.POD_VERSIONS ?? '1').split(',').map(Number);

@Module({
  imports: [
    DurableExecutionModule.forRoot({
      database: { url: process.env.DB_URL!, poolSize: 4 },
      worker: {
        workerId: process.env.POD_ID,
        concurrency: 8,
        pollIntervalMs: 100,
        leaseTtlMs: 2000,
        heartbeatMs: 500,
        drainTimeoutMs: 3000,
        presenceIntervalMs: 1000,
      },
      reconciler: { intervalMs: 250, backoffBaseMs: 10, backoffMaxMs: 200 },
    }),
  ],
  providers: [
    OrderSteps,
    ...(versions.includes(1) ? [OrderV1] : []),
    ...(versions.includes(2) ? [OrderV2] : []),
  ],
})
class PodModule {}

async function main() {
  const app = await NestFactory.createApplicationContext(PodModule, { logger: ['error', 'warn'] });
  app.enableShutdownHooks();
  process.send?.('ready');
}

if (require.main === module) void main();
