/**
 * A chaos worker process: the agent workflow of the chaos suite (model step → two tool commands →
 * model step → approval wait → two notifications) on the real worker schedule. Every step body
 * records its execution in `step_effects` first thing; every command hits a loopback target that
 * counts effects per key. Env: DB_URL, PAY_URL (no key dedupe: lookup policy), NOTIFY_URL (dedupes
 * keys: retry-with-key policy), DURABLE_CRASH_AT.
 */
import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Pool } from 'pg';
import {
  CommandContext,
  CommandLookup,
  DurableExecutionModule,
  DurableStep,
  DurableWorkflow,
  IdempotentCommand,
  RunContext,
} from '../../src';
import { charge, lookupCharge } from '../helpers/fake-target';

const effects = new Pool({ connectionString: process.env.DB_URL, max: 2 });
effects.on('error', () => undefined);
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function executed(runId: string, step: string): Promise<void> {
  await effects.query(`insert into step_effects (run_id, step, ref, at, pid) values ($1, $2, '', '', $3)`, [
    runId,
    step,
    process.pid,
  ]);
}

@Injectable()
export class Model {
  @DurableStep({ name: 'plan', kind: 'model', retry: { maxAttempts: 3, initialDelayMs: 50 } })
  async plan(runId: string, order: string) {
    await executed(runId, 'plan');
    await pause(400);
    return { id: `req_${order}`, usage: { prompt_tokens: 14000, completion_tokens: 120 }, tool: 'charge' };
  }

  @DurableStep({ name: 'summarize', kind: 'model', retry: { maxAttempts: 3, initialDelayMs: 50 } })
  async summarize(runId: string, chargeId: string) {
    await executed(runId, 'summarize');
    await pause(300);
    return { id: `sum_${chargeId}`, usage: { prompt_tokens: 2000, completion_tokens: 60 }, text: 'ok' };
  }
}

/** The retry policy of every command. */
const RETRY = { maxAttempts: 3, initialDelayMs: 50 };

/** A command's call: one effect of `args.amount` at the target in env `target`, under the command's key. */
function dispatch(target: 'PAY_URL' | 'NOTIFY_URL', args: { amount: number }, ctx?: CommandContext) {
  return charge(process.env[target]!, ctx!.idempotencyKey, args.amount);
}

@Injectable()
export class Vendors implements CommandLookup {
  @IdempotentCommand({ name: 'credit_check', inDoubt: 'lookup', retry: RETRY })
  creditCheck(args: { amount: number }, ctx?: CommandContext) {
    return dispatch('PAY_URL', args, ctx);
  }

  @IdempotentCommand({ name: 'charge_card', inDoubt: 'lookup', retry: RETRY })
  chargeCard(args: { amount: number }, ctx?: CommandContext) {
    return dispatch('PAY_URL', args, ctx);
  }

  lookupCommand(_command: string, key: string) {
    return lookupCharge(process.env.PAY_URL!, key);
  }
}

@Injectable()
export class Notifier {
  @IdempotentCommand({ name: 'notify_buyer', inDoubt: 'retry-with-key', retry: RETRY })
  buyer(args: { amount: number }, ctx?: CommandContext) {
    return dispatch('NOTIFY_URL', args, ctx);
  }

  @IdempotentCommand({ name: 'notify_supplier', inDoubt: 'retry-with-key', retry: RETRY })
  supplier(args: { amount: number }, ctx?: CommandContext) {
    return dispatch('NOTIFY_URL', args, ctx);
  }
}

@DurableWorkflow('agent', { maxAttempts: 50 })
export class AgentWorkflow {
  constructor(
    private readonly model: Model,
    private readonly vendors: Vendors,
    private readonly notifier: Notifier,
  ) {}

  async run(input: { order: string; amount: number }, ctx: RunContext) {
    const plan = await this.model.plan(ctx.runId, input.order);
    await this.vendors.creditCheck({ amount: input.amount });
    const charged = await this.vendors.chargeCard({ amount: input.amount });
    const summary = await this.model.summarize(ctx.runId, charged.chargeId);
    const approval = await ctx.waitForSignal<{ by: string }>('approval');
    await this.notifier.buyer({ amount: input.amount });
    await this.notifier.supplier({ amount: input.amount });
    return { plan: plan.tool, chargeId: charged.chargeId, summary: summary.text, approvedBy: approval.by };
  }
}

/** Timings of the chaos workers: short leases so stalls and kills are recovered within seconds. */
export const CHAOS_WORKER_OPTIONS = {
  concurrency: 8,
  pollIntervalMs: 100,
  leaseTtlMs: 2000,
  heartbeatMs: 1500, // late heartbeats: a woken zombie tries its writes before it learns it lost
  drainTimeoutMs: 1000,
};

@Module({
  imports: [
    DurableExecutionModule.forRoot({
      database: { url: process.env.DB_URL!, poolSize: 6, migrationsRun: false },
      worker: CHAOS_WORKER_OPTIONS,
      reconciler: { intervalMs: 300, backoffBaseMs: 20, backoffMaxMs: 500 },
    }),
  ],
  providers: [Model, Vendors, Notifier, AgentWorkflow],
})
class ChaosWorkerModule {}

async function main(): Promise<void> {
  const app = await NestFactory.createApplicationContext(ChaosWorkerModule, { logger: false });
  app.enableShutdownHooks();
  process.send?.('ready');
}

if (require.main === module) void main();
