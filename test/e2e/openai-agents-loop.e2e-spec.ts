/**
 * The OpenAI Agents SDK's agent loop as a durable run (`nestjs-durable-execution/openai-agents`): the
 * runner with a durable model provider and a durable agent gives the same result as the plain SDK run
 * against the same scripted Chat Completions server: two parallel function tool calls (a read as a
 * recorded tool step, the refund as a command keyed by the model's call id), then a handoff to the
 * receipts agent, then its answer. Every model turn is a recorded model step (usage and response id in
 * its meta). The replay of the run (the replay check after every attempt, and a restart: a new app on
 * the same database running the run again from its record) rebuilds the same result without a request.
 */
import { INestApplication } from '@nestjs/common';
import { Runner } from '@openai/agents';
import { CommandGateway, RunRepository } from '../../src';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil } from '../helpers/drive';
import { AgentsServer, startAgentsServer } from '../openai-agents/scripted-agents-server';
import {
  AGENTS_WORKFLOWS,
  agentsEnv,
  AgentsSupportWorkflow,
  chatProvider,
  essence,
  observed,
  QUESTION,
  StreamingAgentsSupportWorkflow,
  triageAgent,
} from '../openai-agents/agents-app';

const ANSWER = 'Refunded 1250 cents for order A-1 (refund rf_1); the order was delivered.';

describe('openai-agents: the runner with a durable model provider and a durable agent', () => {
  let db: TestDatabase;
  let server: AgentsServer;
  let app: INestApplication;

  beforeAll(async () => {
    db = await createTestDatabase('oaloop');
    server = await startAgentsServer();
    agentsEnv.url = server.url;
    app = await bootApp(db.url, AGENTS_WORKFLOWS);
  });
  afterAll(async () => {
    await app?.close();
    await server?.close();
    await db?.drop();
  });
  beforeEach(() => server.reset());

  it('parallel tool calls, a handoff and the answer give the plain SDK run’s result; a restart replays with no request', async () => {
    const plain = await new Runner({ modelProvider: chatProvider(), tracingDisabled: true }).run(
      triageAgent,
      QUESTION,
    );
    expect(plain.finalOutput).toBe(ANSWER);
    expect(plain.lastAgent?.name).toBe('receipts_agent');
    expect(server.modelRequests.map((r) => [r.turn, r.agent])).toEqual([
      [1, 'triage'],
      [2, 'triage'],
      [3, 'receipts'],
    ]);
    server.reset();

    const runs = app.get(RunRepository);
    const { run } = await runs.start(AgentsSupportWorkflow, { orderId: 'A-1' });
    const done = await driveUntil(app, db, run.id);
    expect(done.status).toBe('succeeded');

    // Requests counted at the server: one per model turn, one per tool call.
    expect(server.modelRequests.map((r) => [r.turn, r.agent])).toEqual([
      [1, 'triage'],
      [2, 'triage'],
      [3, 'receipts'],
    ]);
    expect(server.vendorCalls.map((c) => `${c.what}:${c.toolCallId}`).sort()).toEqual([
      'lookup_order:call_1_a',
      'refund:call_1_b',
    ]);
    expect([...server.refunds.values()]).toEqual([
      { refundId: 'rf_1', toolCallId: 'call_1_b', amountCents: 1250 },
    ]);

    // The first execution and the replay check's replay both left the SDK's result: the same as plain.
    const seen = observed.filter((o) => o.runId === run.id);
    expect(seen.length).toBeGreaterThanOrEqual(2);
    for (const o of seen) expect(o.essence).toEqual(essence(plain));
    expect(done.output).toEqual({
      finalOutput: ANSWER,
      lastAgent: 'receipts_agent',
      items: [
        'tool_call_item',
        'tool_call_item',
        'tool_call_output_item',
        'tool_call_output_item',
        'handoff_call_item',
        'handoff_output_item',
        'message_output_item',
      ],
      responseIds: ['chatcmpl_1', 'chatcmpl_2', 'chatcmpl_3'],
      totalTokens: 110 + 220 + 330,
    });

    // The record: three model steps (the handoff is turn 2's output), the read a tool step, the refund a command.
    const checkpoints = await runs.checkpoints(run.id);
    expect(checkpoints.map((c) => c.stepName)).toEqual([
      'model:scripted-agents-1',
      'tool:lookup_order',
      'command:refund',
      'model:scripted-agents-1',
      'model:scripted-agents-1',
    ]);
    expect(checkpoints.filter((c) => c.stepName.startsWith('model:')).map((c) => c.meta)).toEqual([
      { usage: { inputTokens: 100, outputTokens: 10, totalTokens: 110 }, requestId: 'chatcmpl_1' },
      { usage: { inputTokens: 200, outputTokens: 20, totalTokens: 220 }, requestId: 'chatcmpl_2' },
      { usage: { inputTokens: 300, outputTokens: 30, totalTokens: 330 }, requestId: 'chatcmpl_3' },
    ]);
    const [cmd] = await app.get(CommandGateway).listForRun(run.id);
    expect(cmd).toMatchObject({ name: 'refund', status: 'succeeded' });
    expect(cmd.idempotencyKey).toMatch(/:tool_call_call_1_b:refund$/);
    expect(server.vendorCalls.find((c) => c.what === 'refund')!.key).toBe(cmd.idempotencyKey);

    // A restart: another app on the same database runs the run again from the top (as a worker that
    // took it over after every turn committed). Every turn, the handoff included, comes from the record.
    const before = { model: server.modelRequests.length, vendor: server.vendorCalls.length };
    await db.query(
      `update ai_runs set status = 'pending', available_at = now(), output = null where id = $1`,
      [run.id],
    );
    const app2 = await bootApp(db.url, AGENTS_WORKFLOWS);
    try {
      const again = await driveUntil(app2, db, run.id);
      expect(again.status).toBe('succeeded');
      expect(again.output).toEqual(done.output);
    } finally {
      await app2.close();
    }
    expect(server.modelRequests).toHaveLength(before.model);
    expect(server.vendorCalls).toHaveLength(before.vendor);
    const replays = observed.filter((o) => o.runId === run.id);
    expect(replays.length).toBeGreaterThan(seen.length);
    for (const o of replays) expect(o.essence).toEqual(essence(plain));
  });

  it('stream: true: the text deltas reach the run’s progress stream once per committed turn, the answer is plain’s', async () => {
    const runs = app.get(RunRepository);
    const { run } = await runs.start(StreamingAgentsSupportWorkflow, { orderId: 'A-1' });
    const done = await driveUntil(app, db, run.id);
    expect(done.status).toBe('succeeded');
    expect(done.output).toMatchObject({ finalOutput: ANSWER, lastAgent: 'receipts_agent', deltas: ANSWER });
    expect(server.modelRequests.map((r) => [r.turn, r.stream])).toEqual([
      [1, true],
      [2, true],
      [3, true],
    ]);
    const entries = (await runs.stream(run.id)).filter((e) => e.topic === 'agents.delta');
    expect(entries.every((e) => !e.superseded)).toBe(true);
    expect(entries.map((e) => (e.data as { text: string }).text).join('')).toBe(ANSWER);
    expect(server.refunds.size).toBe(1);
  });
});
