/**
 * One retry owner for the AI SDK's model calls: the model step's policy. A persistent 500 makes at most
 * its `maxAttempts` requests in all (no SDK retries inside, no claim retries on top); a 400 that the
 * SDK's provider marks not retryable makes one. A tool's own error is recorded and handed to the model
 * as the SDK does, and a replay hands the model the same error without running the tool again.
 */
import { INestApplication } from '@nestjs/common';
import { generateText, tool } from 'ai';
import { DurableWorkflow, RunContext, RunRepository } from '../../src';
import { durableModel, durableTools } from '../../src/ai-sdk';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil } from '../helpers/drive';
import { ScriptedServer, startScriptedServer } from '../helpers/scripted-openai';
import {
  AGENT_WORKFLOWS,
  agentCall,
  agentEnv,
  chatModel,
  supportTools,
  SupportAgentWorkflow,
} from '../fixtures/ai-agent-app';

let lookupsTried = 0;
const answers: string[] = [];

/** The support agent whose order lookup fails: the model gets the error and answers with it. */
@DurableWorkflow('ai-tool-error', { maxAttempts: 5 })
class ToolErrorWorkflow {
  async run(_input: unknown, ctx: RunContext) {
    const tools = {
      ...supportTools(),
      lookup_order: tool({
        ...supportTools().lookup_order,
        execute: async () => {
          lookupsTried++;
          throw new Error('order service down');
        },
      }),
    };
    const result = await generateText(
      agentCall(
        durableModel(ctx, chatModel(), { retry: agentEnv.modelRetry }),
        durableTools(ctx, tools, {
          commands: ['refund'],
          retry: { maxAttempts: 2, initialDelayMs: 1, maxDelayMs: 2 },
        }),
      ),
    );
    answers.push(result.text);
    const errors = result.steps.flatMap((s) => s.content.filter((c) => c.type === 'tool-error'));
    return {
      text: result.text,
      toolErrors: errors.map((e) => ({ tool: e.toolName, error: String((e.error as Error).message) })),
    };
  }
}

describe('ai-sdk: model errors and tool errors', () => {
  let db: TestDatabase;
  let server: ScriptedServer;
  let app: INestApplication;

  beforeAll(async () => {
    db = await createTestDatabase('aisdkerr');
    server = await startScriptedServer();
    agentEnv.url = server.url;
    app = await bootApp(db.url, [...AGENT_WORKFLOWS, ToolErrorWorkflow]);
  });
  afterAll(async () => {
    await app?.close();
    await server?.close();
    await db?.drop();
  });
  beforeEach(() => server.reset());

  it('a persistent 500 makes maxAttempts requests in all, and the run fails', async () => {
    server.mode = 'fail-500';
    const runs = app.get(RunRepository);
    const { run } = await runs.start(SupportAgentWorkflow, { orderId: 'A-1' });
    const done = await driveUntil(app, db, run.id);
    expect(done.status).toBe('failed');
    expect(done.error).toMatchObject({ message: 'the model is overloaded' });
    expect(server.modelRequests).toHaveLength(agentEnv.modelRetry.maxAttempts); // 3, not 3 × 3 × 5
  });

  it('an error the SDK marks not retryable (400) makes one request', async () => {
    server.mode = 'fail-400';
    const runs = app.get(RunRepository);
    const { run } = await runs.start(SupportAgentWorkflow, { orderId: 'A-1' });
    const done = await driveUntil(app, db, run.id);
    expect(done.status).toBe('failed');
    expect(done.error).toMatchObject({ message: 'bad request: unknown parameter' });
    expect(server.modelRequests).toHaveLength(1);
  });

  it("a tool's own error is recorded and handed to the model; a replay hands it the same", async () => {
    lookupsTried = 0;
    answers.length = 0;
    const runs = app.get(RunRepository);
    const { run } = await runs.start(ToolErrorWorkflow, {});
    const done = await driveUntil(app, db, run.id);
    expect(done.status).toBe('succeeded');
    expect(done.output).toEqual({
      text: 'I could not look up the order: order service down',
      toolErrors: [{ tool: 'lookup_order', error: 'order service down' }],
    });
    expect(lookupsTried).toBe(2); // the tool step's two attempts, and never again
    expect(server.modelRequests.map((r) => r.turn)).toEqual([1, 2]);
    // The replay check replayed the run: the model got the same error, from the record.
    expect(answers.length).toBeGreaterThanOrEqual(2);
    expect(new Set(answers)).toEqual(new Set(['I could not look up the order: order service down']));
  });
});
