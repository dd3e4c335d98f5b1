/**
 * A worker process of the differential test's fault profile: the module with the differential
 * workflow, its worker and reconciler on their real schedules, until killed. Env: DB_URL, DIFF_WORLD_URL,
 * WORKER_ID, LEASE_TTL_MS, HEARTBEAT_MS, LATE_CALL_GRACE_MS. Tells its parent 'ready' once booted.
 */
import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { DurableExecutionModule } from '../../src';
import { DIFF_PROVIDERS } from './workflow';

@Module({
  imports: [
    DurableExecutionModule.forRoot({
      database: { url: process.env.DB_URL!, poolSize: 4 },
      worker: {
        concurrency: 8,
        pollIntervalMs: 100,
        leaseTtlMs: Number(process.env.LEASE_TTL_MS ?? 600),
        heartbeatMs: Number(process.env.HEARTBEAT_MS ?? 150),
        drainTimeoutMs: 500,
        lateCallGraceMs: Number(process.env.LATE_CALL_GRACE_MS ?? 3000),
        workerId: process.env.WORKER_ID,
      },
      reconciler: { intervalMs: 100, backoffBaseMs: 10, backoffMaxMs: 50 },
    }),
  ],
  providers: DIFF_PROVIDERS,
})
class DiffWorkerModule {}

async function main() {
  const app = await NestFactory.createApplicationContext(DiffWorkerModule, { logger: ['error', 'warn'] });
  app.enableShutdownHooks();
  process.send?.('ready');
}

void main();
