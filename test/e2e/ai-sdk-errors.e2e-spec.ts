/**
 * One retry owner for the AI SDK's model calls: the model step's policy. A persistent 500 makes at most
 * its `maxAttempts` requests in all (no SDK retries inside, no claim retries on top); a 400 that the
 * SDK's provider marks not retryable makes one. A tool's own error is recorded and handed to the model
 * as the SDK does, and a replay hands the model the same error without running the tool again.
 */
import path from 'node:path';
import { INestApplication } from '@nestjs/common';
import { generateText, tool } from 'ai';
import { DurableWorkflow, RunContext, RunRepository } from '../../src';
import { runDurableMigrations } from '../../src/migrations';
import { durableModel, durableTools } from '../../src/ai-sdk';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil } from '../helpers/drive';
import { spawnWorker, waitFor, WorkerProcess } from '../helpers/processes';
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

describe('ai-sdk: one retry owner across claims', () => {
  let db: TestDatabase;
  let server: ScriptedServer;
  const workers: WorkerProcess[] = [];
  const FIXTURE = path.join(__dirname, '..', 'fixtures', 'ai-agent-app.ts');

  beforeAll(async () => {
    db = await createTestDatabase('aisdkerrclaims');
    await runDurableMigrations({ type: 'postgres', url: db.url });
    server = await startScriptedServer();
  });
  afterAll(async () => {
    for (const w of workers) w.child.kill('SIGKILL');
    await Promise.all(workers.map((w) => w.exited));
    await server?.close();
    await db?.drop();
  });

  it('a persistent 500, the worker killed between two attempts: maxAttempts requests in all, then the run fails', async () => {
    server.mode = 'fail-500';
    // A backoff of 1.5 s, then 3 s: time to kill the worker in it.
    const env = {
      DB_URL: db.url,
      AI_URL: server.url,
      LEASE_TTL_MS: '1500',
      HEARTBEAT_MS: '400',
      MODEL_RETRY_DELAY_MS: '1500',
    };
    const first = spawnWorker(env, FIXTURE);
    workers.push(first);
    await first.ready;
    const [{ id }] = await db.query<{ id: string }>(
      `insert into ai_runs (kind, input) values ('ai-support', '{"orderId": "A-1"}') returning id`,
    );
    // Two attempts failed and the worker is in the 3 s backoff before the third; the second failure
    // is recorded (the step's cursor) within a moment. (A request whose failure no record holds yet
    // counts as cut off, and is sent again.)
    await waitFor(async () => server.modelRequests.length >= 2, 20_000, 'two attempts');
    const recorded = async () =>
      (await db.query(`select cursor->'failures'->>'count' as n from ai_runs where id = $1`, [id]))[0].n ===
      '2';
    await waitFor(recorded, 1000, 'the second failure recorded').catch(() => undefined);
    first.child.kill('SIGKILL');
    await first.exited;
    expect(server.modelRequests).toHaveLength(2);

    const heir = spawnWorker(env, FIXTURE);
    workers.push(heir);
    await heir.ready;
    await waitFor(
      async () => (await db.query(`select status from ai_runs where id = $1`, [id]))[0].status === 'failed',
      45_000,
      'the run to fail on the second worker',
    );
    const [run] = await db.query(`select error, attempts from ai_runs where id = $1`, [id]);
    expect(run.error).toMatchObject({ message: 'the model is overloaded' });
    // The new claim sent the one attempt left, not a fresh three: 3 requests in all, not 2 + 3.
    expect(server.modelRequests).toHaveLength(agentEnv.modelRetry.maxAttempts);
  }, 90_000);
});
