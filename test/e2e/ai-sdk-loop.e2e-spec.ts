/**
 * The Vercel AI SDK's tool loop as a durable run (`nestjs-durable-execution/ai-sdk`): `generateText` with
 * a durable model and durable tools gives the same result as plain `generateText` against the same
 * scripted OpenAI-compatible server, with every model turn a recorded model step (usage and request
 * id in its meta), the two parallel read-only tool calls recorded steps and the refund a command keyed
 * by the model's toolCallId; the replay of the run (the replay check after every attempt) rebuilds the
 * same result, Dates included, without a request.
 */
import { INestApplication } from '@nestjs/common';
import { generateText } from 'ai';
import { CommandGateway, RunRepository } from '../../src';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil } from '../helpers/drive';
import { ScriptedServer, startScriptedServer } from '../helpers/scripted-openai';
import {
  AGENT_WORKFLOWS,
  agentCall,
  AgentResult,
  agentEnv,
  chatModel,
  observed,
  supportTools,
  StreamingSupportAgentWorkflow,
  SupportAgentWorkflow,
} from '../fixtures/ai-agent-app';

/** What the SDK's result says, the transport's own details (headers, raw bodies) left out. */
function essence(r: AgentResult) {
  return {
    text: r.text,
    reasoningText: r.reasoningText,
    finishReason: r.finishReason,
    totalUsage: r.totalUsage,
    toolCalls: r.steps.map((s) => s.toolCalls),
    toolResults: r.steps.map((s) => s.toolResults),
    steps: r.steps.map((s) => ({
      content: s.content,
      finishReason: s.finishReason,
      usage: s.usage,
      providerMetadata: s.providerMetadata,
      warnings: s.warnings,
      response: {
        id: s.response.id,
        timestamp: s.response.timestamp,
        modelId: s.response.modelId,
        messages: s.response.messages,
      },
    })),
    responseMessages: r.response.messages,
  };
}

describe('ai-sdk: generateText with durable model and tools', () => {
  let db: TestDatabase;
  let server: ScriptedServer;
  let app: INestApplication;

  beforeAll(async () => {
    db = await createTestDatabase('aisdk');
    server = await startScriptedServer();
    agentEnv.url = server.url;
    app = await bootApp(db.url, AGENT_WORKFLOWS);
  });
  afterAll(async () => {
    await app?.close();
    await server?.close();
    await db?.drop();
  });
  beforeEach(() => server.reset());

  it('a multi-turn tool loop (two parallel tool calls, a refund, the answer) gives plain generateText’s result', async () => {
    const plain = await generateText(agentCall(chatModel(), supportTools()));
    expect(plain.text).toBe('Refunded 1250 cents for order A-1 (refund rf_1).');
    expect(server.modelRequests.map((r) => r.turn)).toEqual([1, 2, 3]);
    server.reset();

    const runs = app.get(RunRepository);
    const { run } = await runs.start(SupportAgentWorkflow, { orderId: 'A-1' });
    const done = await driveUntil(app, db, run.id);
    expect(done.status).toBe('succeeded');

    // Requests counted at the server: one per model turn, one per tool call.
    expect(server.modelRequests.map((r) => r.turn)).toEqual([1, 2, 3]);
    expect(server.vendorCalls.map((c) => c.what).sort()).toEqual(['lookup_order', 'refund', 'refund_policy']);
    expect([...server.refunds.values()]).toEqual([
      { refundId: 'rf_1', toolCallId: 'call_2_c', amountCents: 1250 },
    ]);

    // The first execution and the replay check's replay both left the SDK's result: the same as plain.
    const seen = observed.filter((o) => o.runId === run.id);
    expect(seen.length).toBeGreaterThanOrEqual(2);
    for (const o of seen) {
      expect(essence(o.result)).toEqual(essence(plain));
      expect(o.result.steps[0].response.timestamp).toBeInstanceOf(Date);
    }
    expect(server.modelRequests).toHaveLength(3); // the replay asked nothing

    // The run's output (stored through the codec) and the record of each model turn.
    expect(done.output).toMatchObject({
      text: plain.text,
      steps: 3,
      toolCalls: [
        { id: 'call_1_a', name: 'lookup_order' },
        { id: 'call_1_b', name: 'refund_policy' },
        { id: 'call_2_c', name: 'refund' },
      ],
      responseIds: ['chatcmpl_1', 'chatcmpl_2', 'chatcmpl_3'],
    });
    const checkpoints = await runs.checkpoints(run.id);
    const models = checkpoints.filter((c) => c.stepName === 'model:scripted-1');
    expect(models.map((c) => c.meta)).toEqual([
      { usage: { inputTokens: 100, outputTokens: 10, totalTokens: 110 }, requestId: 'chatcmpl_1' },
      { usage: { inputTokens: 200, outputTokens: 20, totalTokens: 220 }, requestId: 'chatcmpl_2' },
      { usage: { inputTokens: 300, outputTokens: 30, totalTokens: 330 }, requestId: 'chatcmpl_3' },
    ]);
    expect(
      checkpoints
        .filter((c) => c.stepName.startsWith('tool:'))
        .map((c) => c.stepName)
        .sort(),
    ).toEqual(['tool:lookup_order', 'tool:refund_policy']);
    const [refund] = await app.get(CommandGateway).listForRun(run.id);
    expect(refund).toMatchObject({ name: 'refund', status: 'succeeded' });
    expect(refund.idempotencyKey).toMatch(/:tool_call_call_2_c:refund$/);
    expect(server.vendorCalls.find((c) => c.what === 'refund')!.key).toBe(refund.idempotencyKey);
  });

  it('streamText: the deltas reach the run’s progress stream once per committed turn, and the answer is plain’s', async () => {
    const runs = app.get(RunRepository);
    const { run } = await runs.start(StreamingSupportAgentWorkflow, { orderId: 'A-1' });
    const done = await driveUntil(app, db, run.id);
    expect(done.status).toBe('succeeded');
    const answer = 'Refunded 1250 cents for order A-1 (refund rf_1).';
    expect(done.output).toMatchObject({ text: answer, steps: 3 });
    expect(server.modelRequests.map((r) => [r.turn, r.stream])).toEqual([
      [1, true],
      [2, true],
      [3, true],
    ]);
    const entries = await runs.stream(run.id);
    const deltas = entries.filter((e) => e.topic === 'ai.delta');
    expect(deltas.every((e) => !e.superseded)).toBe(true);
    const text = deltas.map((e) => e.data as { kind: string; text: string });
    expect(
      text
        .filter((d) => d.kind === 'text')
        .map((d) => d.text)
        .join(''),
    ).toBe(answer);
    expect(
      text
        .filter((d) => d.kind === 'reasoning')
        .map((d) => d.text)
        .join(''),
    ).toBe('The order is within the refund window.');
    expect(server.refunds.size).toBe(1);
  });
});
