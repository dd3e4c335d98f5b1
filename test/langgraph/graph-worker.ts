/**
 * A worker process for the LangGraph crash test: boots the module with the refund agent of
 * refund-graph.ts and runs the worker and reconciler on their real schedules until killed. Env: DB_URL,
 * LEASE_TTL_MS, HEARTBEAT_MS, LG_MODEL_URL (the model agent of model-graph.ts: its scripted server's
 * base URL), and LG_HANG_AT (a point of `hooks.at`): when the graph reaches it, the
 * process tells its parent (`{ at }` over IPC) and holds there until the parent kills it.
 */
import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { DurableExecutionModule } from '../../src';
import { ModelAgentWorkflow, useModelServer } from './model-graph';
import { hooks, RefundAgentWorkflow, useDatabase } from './refund-graph';

const hangAt = process.env.LG_HANG_AT;
if (hangAt)
  hooks.at = async (point) => {
    if (point !== hangAt) return;
    process.send?.({ at: point });
    await new Promise(() => undefined);
  };

@Module({
  imports: [
    DurableExecutionModule.forRoot({
      database: { url: process.env.DB_URL ?? '', poolSize: 5 },
      worker: {
        concurrency: 2,
        pollIntervalMs: 100,
        leaseTtlMs: Number(process.env.LEASE_TTL_MS ?? 1500),
        heartbeatMs: Number(process.env.HEARTBEAT_MS ?? 400),
      },
      reconciler: { intervalMs: 200, backoffBaseMs: 10, backoffMaxMs: 100 },
    }),
  ],
  providers: [RefundAgentWorkflow, ModelAgentWorkflow],
})
class GraphWorkerModule {}

async function main(): Promise<void> {
  useDatabase(process.env.DB_URL ?? '');
  useModelServer(process.env.LG_MODEL_URL ?? '');
  await NestFactory.createApplicationContext(GraphWorkerModule, { logger: ['error', 'warn'] });
  process.send?.({ ready: true });
}

void main().catch((err) => {
  console.error(err);
  process.exit(1);
});
