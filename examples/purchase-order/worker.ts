/**
 * A durable worker process (one "pod" of the demo's deployment): the module claims runs, drives them,
 * renews their leases and, on SIGTERM, drains for `worker.drainTimeoutMs` and hands the rest back.
 * Env: DEMO_WORKER = JSON { databaseUrl, timeScaleMs, concurrency, workerId, services, deferred }.
 * With `deferred`, the process loads its code and waits for a `start` message before it boots: the new
 * version's pods are scheduled and pulled before the rollout, so their start-up is quick.
 */
import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { DurableExecutionModule } from '../../src'; // in an app: 'nestjs-durable-execution'
import type { ServiceSettings } from './config';
import { durableOptions, PurchaseOrderModule } from './purchase-order.module';

interface WorkerEnv {
  databaseUrl: string;
  timeScaleMs: number;
  concurrency: number;
  workerId: string;
  services: ServiceSettings;
  deferred?: boolean;
}

/** Resolves at once, or when the orchestrator says `start` (see `deferred`). */
export function startSignal(deferred: boolean | undefined): Promise<void> {
  if (!deferred) return Promise.resolve();
  process.send?.({ type: 'loaded' });
  return new Promise((resolve) => {
    const onMessage = (m: { type?: string }) => {
      if (m?.type !== 'start') return;
      process.off('message', onMessage);
      resolve();
    };
    process.on('message', onMessage);
  });
}

async function main() {
  const env = JSON.parse(process.env.DEMO_WORKER!) as WorkerEnv;
  process.on('disconnect', () => process.kill(process.pid, 'SIGTERM')); // the orchestrator is gone
  await startSignal(env.deferred);

  @Module({
    imports: [
      DurableExecutionModule.forRoot(
        durableOptions({
          databaseUrl: env.databaseUrl,
          timeScaleMs: env.timeScaleMs,
          worker: true,
          concurrency: env.concurrency,
          workerId: env.workerId,
        }),
      ),
      PurchaseOrderModule.register(env.services),
    ],
  })
  class WorkerModule {}

  const app = await NestFactory.createApplicationContext(WorkerModule, { logger: ['error', 'warn'] });
  app.enableShutdownHooks(); // SIGTERM → drain → release what is left → exit
  process.send?.({ type: 'ready' });
}

if (require.main === module) {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
