/**
 * One retry owner for the OpenAI Agents SDK's model calls: the model step's policy. A persistent 500
 * makes at most its `maxAttempts` requests in all: the OpenAI client's own retries (2 by default, kept
 * in the provider here) are off for each request, the runner's (`modelSettings.retry`, even with a
 * policy that approves every replay) are vetoed, and no claim retries on top. A 400 makes one request.
 * A tool's own error is what the SDK makes of it (a message for the model), recorded: a replay hands
 * the model the same message without running the tool again. A cancel that arrives while a tool call
 * is held open aborts the call through the signal the tool was given, and the run ends cancelled
 * without the model ever getting the engine's error as a tool message.
 */
import { INestApplication } from '@nestjs/common';
import { Runner, tool } from '@openai/agents';
import { z } from 'zod';
import { DurableWorkflow, RunContext, RunRepository } from '../../src';
import { durableAgent, durableModelProvider } from '../../src/openai-agents';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil } from '../helpers/drive';
import { waitFor } from '../helpers/processes';
import { DurableWorker } from '../../src/engine/worker.service';
import { AgentsServer, startAgentsServer } from '../openai-agents/scripted-agents-server';
import {
  AGENTS_WORKFLOWS,
  agentsEnv,
  AgentsSupportWorkflow,
  chatProvider,
  QUESTION,
  triageAgent,
} from '../openai-agents/agents-app';

/** The desk with the runner's own retries turned on as far as they go. */
@DurableWorkflow('oa-runner-retries', { maxAttempts: 5 })
class RunnerRetriesWorkflow {
  async run(_input: unknown, ctx: RunContext) {
    const runner = new Runner({
      modelProvider: durableModelProvider(ctx, chatProvider(), { retry: agentsEnv.modelRetry }),
      tracingDisabled: true,
      modelSettings: {
        retry: {
          maxRetries: 5,
          backoff: { initialDelayMs: 1 },
          policy: () => ({ retry: true, approveUnsafeReplay: true }),
        },
      },
    });
    return (await runner.run(durableAgent(ctx, triageAgent, { commands: ['refund'] }), QUESTION)).finalOutput;
  }
}

let lookupsTried = 0;
const answers: string[] = [];

/** The desk whose order lookup fails: the SDK hands the model the error message. */
@DurableWorkflow('oa-tool-error', { maxAttempts: 5 })
class ToolErrorWorkflow {
  async run(_input: unknown, ctx: RunContext) {
    const failing = tool({
      name: 'lookup_order',
      description: 'Looks up an order',
      parameters: z.object({ orderId: z.string() }),
      execute: async () => {
        lookupsTried++;
        throw new Error('order service down');
      },
    });
    const agent = triageAgent.clone({
      tools: [failing, ...triageAgent.tools.filter((t) => t.name === 'refund')],
    });
    const runner = new Runner({
      modelProvider: durableModelProvider(ctx, chatProvider()),
      tracingDisabled: true,
    });
    const result = await runner.run(durableAgent(ctx, agent, { commands: ['refund'] }), QUESTION);
    answers.push(String(result.finalOutput));
    return result.finalOutput;
  }
}

describe('openai-agents: model errors and tool errors', () => {
  let db: TestDatabase;
  let server: AgentsServer;
  let app: INestApplication;

  beforeAll(async () => {
    db = await createTestDatabase('oaerr');
    server = await startAgentsServer();
    agentsEnv.url = server.url;
    app = await bootApp(db.url, [...AGENTS_WORKFLOWS, RunnerRetriesWorkflow, ToolErrorWorkflow], {
      worker: { heartbeatMs: 100, leaseTtlMs: 2000 },
    });
  });
  afterAll(async () => {
    await app?.close();
    await server?.close();
    await db?.drop();
  });
  beforeEach(() => server.reset());

  it('a persistent 500 makes maxAttempts requests in all, and the run fails', async () => {
    server.mode = 'fail-500';
    // What is turned off: the plain SDK run sends the request three times (the client's two retries).
    const plain = new Runner({ modelProvider: chatProvider(), tracingDisabled: true });
    await expect(plain.run(triageAgent, QUESTION)).rejects.toThrow('the model is overloaded');
    expect(server.modelRequests).toHaveLength(3);
    server.reset();
    server.mode = 'fail-500';
    const runs = app.get(RunRepository);
    const { run } = await runs.start(AgentsSupportWorkflow, { orderId: 'A-1' });
    const done = await driveUntil(app, db, run.id);
    expect(done.status).toBe('failed');
    expect(done.error?.message).toContain('the model is overloaded');
    expect(server.modelRequests).toHaveLength(agentsEnv.modelRetry.maxAttempts); // 3, not 3 × 3 (client) × 5 (claims)
  });

  it('the runner’s own retries (modelSettings.retry) never run on top of the step’s', async () => {
    server.mode = 'fail-500';
    const runs = app.get(RunRepository);
    const { run } = await runs.start(RunnerRetriesWorkflow, {});
    const done = await driveUntil(app, db, run.id);
    expect(done.status).toBe('failed');
    expect(server.modelRequests).toHaveLength(agentsEnv.modelRetry.maxAttempts);
  });

  it('a 400 makes exactly one request', async () => {
    server.mode = 'fail-400';
    const runs = app.get(RunRepository);
    const { run } = await runs.start(AgentsSupportWorkflow, { orderId: 'A-1' });
    const done = await driveUntil(app, db, run.id);
    expect(done.status).toBe('failed');
    expect(done.error?.message).toContain('bad request: unknown parameter');
    expect(server.modelRequests).toHaveLength(1);
  });

  it("a tool's own error reaches the model as the SDK makes it; a replay hands it the same", async () => {
    lookupsTried = 0;
    answers.length = 0;
    const runs = app.get(RunRepository);
    const { run } = await runs.start(ToolErrorWorkflow, {});
    const done = await driveUntil(app, db, run.id);
    expect(done.status).toBe('succeeded');
    expect(lookupsTried).toBe(1);
    expect(server.modelRequests.map((r) => r.turn)).toEqual([1, 2, 3]);
    expect(answers.length).toBeGreaterThanOrEqual(2); // the first execution and the replay check's
    expect(new Set(answers)).toEqual(new Set([done.output]));
    const [tool] = (await runs.checkpoints(run.id)).filter((c) => c.stepName === 'tool:lookup_order');
    expect(JSON.stringify(tool.output)).toContain('An error occurred while running the tool');
  });

  it('a cancel inside a tool call stops the run: the model never gets it as a tool result', async () => {
    server.hangOrders = true;
    const runs = app.get(RunRepository);
    const { run } = await runs.start(AgentsSupportWorkflow, { orderId: 'A-1' });
    const worker = app.get(DurableWorker);
    await worker.tick();
    await waitFor(
      async () => server.vendorCalls.some((c) => c.what === 'lookup_order'),
      15_000,
      'the lookup',
    );
    await runs.cancel(run.id, 'the customer withdrew');
    await worker.heartbeat(); // the worker observes the cancel (its timer is off in these tests)
    await worker.idle();
    const done = await driveUntil(app, db, run.id);
    expect(done.status).toBe('cancelled');
    expect(server.modelRequests.map((r) => r.turn)).toEqual([1]); // no turn with the cancel as a tool message
    const checkpoints = await runs.checkpoints(run.id);
    expect(checkpoints.map((c) => c.stepName)).not.toContain('tool:lookup_order');
  });
});
