/**
 * A two-agent support desk written with the OpenAI Agents SDK (`@openai/agents`), as a team would write
 * it, plus the wrappers of `nestjs-durable-execution/openai-agents`: a triage agent with two function
 * tools (a read, and a refund with a side effect) that hands off to a receipts agent, against the
 * scripted server of ./scripted-agents-server.ts. Used in-process by the openai-agents e2e tests and,
 * run as a script, as a worker process for the crash test (env: DB_URL, AI_URL, LEASE_TTL_MS, HEARTBEAT_MS,
 * AWAIT_GO).
 */
import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Agent, OpenAIProvider, Runner, tool } from '@openai/agents';
import type { RunResult, StreamedRunResult } from '@openai/agents';
import { z } from 'zod';
import { DurableExecutionModule, DurableWorkflow, RunContext } from '../../src';
import { agentToolCommandContext, durableAgent, durableModelProvider } from '../../src/openai-agents';
import { RECEIPTS_INSTRUCTIONS, TRIAGE_INSTRUCTIONS } from './scripted-agents-server';

/** Where the scripted model and vendor listen (set by an in-process test, or AI_URL in a worker process). */
export const agentsEnv = {
  url: process.env.AI_URL ?? '',
  modelRetry: { maxAttempts: 3, initialDelayMs: 10, maxDelayMs: 20 },
};

/** The SDK's OpenAI provider on the Chat Completions API; its client keeps its default `maxRetries` (2). */
export function chatProvider(): OpenAIProvider {
  return new OpenAIProvider({ baseURL: `${agentsEnv.url}/v1`, apiKey: 'test', useResponses: false });
}

const lookupOrder = tool({
  name: 'lookup_order',
  description: 'Looks up an order',
  parameters: z.object({ orderId: z.string() }),
  execute: async ({ orderId }, _context, details) => {
    const r = await fetch(`${agentsEnv.url}/orders/${orderId}`, {
      headers: { 'x-tool-call-id': details?.toolCall?.callId ?? '' },
      signal: details?.signal,
    });
    return (await r.json()) as { orderId: string; amountCents: number; status: string };
  },
});

/** The refund sends the command's idempotency key when it has one. */
const refund = tool({
  name: 'refund',
  description: 'Refunds an order through the payment vendor',
  parameters: z.object({ orderId: z.string(), amountCents: z.number() }),
  execute: async ({ orderId, amountCents }, _context, details) => {
    const callId = details?.toolCall?.callId ?? '';
    const key = agentToolCommandContext(details)?.idempotencyKey ?? `plain-${callId}`;
    const r = await fetch(`${agentsEnv.url}/refunds`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key },
      body: JSON.stringify({ orderId, amountCents, toolCallId: callId }),
      signal: details?.signal,
    });
    return (await r.json()) as { refundId: string; amountCents: number };
  },
});

export const receiptsAgent = new Agent({
  name: 'receipts_agent',
  instructions: RECEIPTS_INSTRUCTIONS,
  model: 'scripted-agents-1',
});

export const triageAgent = new Agent({
  name: 'triage_agent',
  instructions: TRIAGE_INSTRUCTIONS,
  model: 'scripted-agents-1',
  tools: [lookupOrder, refund],
  handoffs: [receiptsAgent],
});

/** Asks the vendor whether it applied the refund with this key. */
export async function lookupRefund(key: string) {
  const r = await fetch(`${agentsEnv.url}/refunds/${encodeURIComponent(key)}`);
  return (await r.json()) as { found: true; result: unknown } | { found: false };
}

export const QUESTION = 'Order A-1 arrived broken. Please refund it.';

/** What a run's result says, as JSON: compared between the plain SDK run and the durable one. */
export function essence(result: RunResult<any, any> | StreamedRunResult<any, any>) {
  return JSON.parse(
    JSON.stringify({
      finalOutput: result.finalOutput,
      lastAgent: result.lastAgent?.name,
      newItems: result.newItems.map((i) => ({
        type: i.type,
        agent: (i as { agent?: { name: string } }).agent?.name,
        raw: i.rawItem,
      })),
      rawResponses: result.rawResponses,
      history: result.history,
    }),
  ) as Record<string, unknown>;
}

/** What in-process tests look at: each execution of `run()` (first and replays) leaves its result here. */
export const observed: Array<{ runId: string; essence: Record<string, unknown> }> = [];

function durableRunner(ctx: RunContext): Runner {
  return new Runner({
    modelProvider: durableModelProvider(ctx, chatProvider(), { retry: agentsEnv.modelRetry }),
    tracingDisabled: true,
  });
}

function durableTriage(ctx: RunContext) {
  return durableAgent(ctx, triageAgent, {
    commands: { refund: { inDoubt: 'lookup', lookup: lookupRefund } },
  });
}

function summary(result: RunResult<any, any> | StreamedRunResult<any, any>) {
  return {
    finalOutput: result.finalOutput as string,
    lastAgent: result.lastAgent?.name,
    items: result.newItems.map((i) => i.type),
    responseIds: result.rawResponses.map((r) => r.responseId),
    totalTokens: result.rawResponses.reduce((n, r) => n + r.usage.totalTokens, 0),
  };
}

@DurableWorkflow('oa-support', { maxAttempts: 5 })
export class AgentsSupportWorkflow {
  async run(_input: { orderId: string }, ctx: RunContext) {
    const result = await durableRunner(ctx).run(durableTriage(ctx), QUESTION);
    observed.push({ runId: ctx.runId, essence: essence(result) });
    return summary(result);
  }
}

/** The same desk run with `stream: true`: the text deltas reach the run's progress stream. */
@DurableWorkflow('oa-support-stream', { maxAttempts: 5 })
export class StreamingAgentsSupportWorkflow {
  async run(_input: { orderId: string }, ctx: RunContext) {
    const stream = await durableRunner(ctx).run(durableTriage(ctx), QUESTION, { stream: true });
    let deltas = '';
    for await (const e of stream)
      if (e.type === 'raw_model_stream_event' && e.data.type === 'output_text_delta') deltas += e.data.delta;
    await stream.completed;
    observed.push({ runId: ctx.runId, essence: essence(stream) });
    return { ...summary(stream), deltas };
  }
}

export const AGENTS_WORKFLOWS = [AgentsSupportWorkflow, StreamingAgentsSupportWorkflow];

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
  providers: AGENTS_WORKFLOWS,
})
class AgentsWorkerModule {}

async function main() {
  // A standby (AWAIT_GO=1) loads its modules, says so, and starts its worker only when told to.
  if (process.env.AWAIT_GO === '1') {
    const go = new Promise<void>((r) => process.once('message', () => r()));
    process.send?.('loaded');
    await go;
  }
  const app = await NestFactory.createApplicationContext(AgentsWorkerModule, { logger: ['error', 'warn'] });
  app.enableShutdownHooks();
  process.send?.('ready');
}

if (require.main === module) void main();
