/**
 * A naive worker process: consumes purchase orders from the queue (the orchestrator's in-memory broker,
 * over IPC), runs each with its state in memory, and acknowledges the message when the run returns.
 * SIGTERM stops consumption and waits for in-flight runs up to the grace period, then exits; whatever
 * has not finished by then is lost with the process and redelivered by the broker.
 * Env: DEMO_WORKER = JSON { services, databaseUrl, drainMs, deferred } (`deferred`: see ../worker.ts).
 */
import 'reflect-metadata';
import { Global, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Pool } from 'pg';
import { DurableTransactionHost } from '../../../src';
import type { ServiceSettings } from '../config';
import type { PurchaseOrderInput } from '../purchase-order.agent';
import { PurchaseOrderModule } from '../purchase-order.module';
import { startSignal } from '../worker';
import { NAIVE_DB, NaivePurchaseOrder } from './naive-purchase-order';

export type ToWorker = { type: 'deliver'; deliveryId: number; order: PurchaseOrderInput };
export type FromWorker =
  | { type: 'ready' }
  | { type: 'draining' }
  | { type: 'step'; deliveryId: number; index: number }
  | { type: 'ack'; deliveryId: number; status: 'placed' | 'declined' }
  | { type: 'nack'; deliveryId: number; error: string };

async function main() {
  const env = JSON.parse(process.env.DEMO_WORKER!) as {
    services: ServiceSettings;
    databaseUrl: string;
    drainMs: number;
    deferred?: boolean;
  };
  process.on('disconnect', () => process.exit(0)); // the orchestrator is gone
  await startSignal(env.deferred);
  const db = new Pool({ connectionString: env.databaseUrl, max: 4 });
  db.on('error', () => undefined);

  // The agent's step 7 is a @DurableTransaction and injects DurableTransactionHost, which
  // DurableExecutionModule provides; this process has no such module. The naive run never calls that
  // method (it writes its own table), but Nest builds the agent all the same.
  @Global()
  @Module({ providers: [DurableTransactionHost], exports: [DurableTransactionHost] })
  class WithoutDurableExecution {}

  @Module({
    imports: [WithoutDurableExecution, PurchaseOrderModule.register(env.services)],
    providers: [NaivePurchaseOrder, { provide: NAIVE_DB, useValue: db }],
  })
  class NaiveWorkerModule {}

  const app = await NestFactory.createApplicationContext(NaiveWorkerModule, { logger: ['error', 'warn'] });
  const runner = app.get(NaivePurchaseOrder);
  const inFlight = new Set<Promise<void>>();
  const send = (m: FromWorker) => {
    if (process.connected) process.send!(m, undefined, {}, () => undefined);
  };
  let draining = false;

  process.on('message', (m: ToWorker) => {
    if (m.type !== 'deliver' || draining) return;
    const p: Promise<void> = runner
      .run(m.order, (index) => send({ type: 'step', deliveryId: m.deliveryId, index }))
      .then((r) => send({ type: 'ack', deliveryId: m.deliveryId, status: r.status }))
      .catch((err: Error) => send({ type: 'nack', deliveryId: m.deliveryId, error: err.message }))
      .finally(() => inFlight.delete(p));
    inFlight.add(p);
  });

  process.on('SIGTERM', () => {
    draining = true;
    send({ type: 'draining' });
    const deadline = new Promise((r) => setTimeout(r, env.drainMs));
    // A short pause lets the last acknowledgements leave before the process ends.
    void Promise.race([Promise.all([...inFlight]), deadline]).then(() =>
      setTimeout(() => process.exit(0), 50),
    );
  });
  send({ type: 'ready' });
}

if (require.main === module) {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
