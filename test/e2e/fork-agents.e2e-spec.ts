/**
 * Time travel for agents written with the Vercel AI SDK (issue 49): every model turn of a durable
 * `generateText` loop is a step, so forking the run from a turn's position re-asks the model from that
 * turn, with what came before inherited: counted at the scripted OpenAI-compatible server and its vendor,
 * the turn before is not asked again, the reads it led to are not made again, and the refund the new turn
 * asks for reaches the vendor under the fork's own key (a second refund: the original's stays once). The
 * OpenAI Agents SDK's runner likewise: forked from the turn that hands off, the handoff and the answer
 * are asked again and the read and the refund of the turn before are inherited, not sent again.
 */
import { INestApplication } from '@nestjs/common';
import { RunRepository } from '../../src';
import { AGENT_WORKFLOWS, agentEnv, SupportAgentWorkflow } from '../fixtures/ai-agent-app';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil } from '../helpers/drive';
import { ScriptedServer, startScriptedServer } from '../helpers/scripted-openai';
import { AgentsServer, startAgentsServer } from '../openai-agents/scripted-agents-server';
import { AGENTS_WORKFLOWS, agentsEnv, AgentsSupportWorkflow } from '../openai-agents/agents-app';

describe('fork an AI SDK agent from a model turn', () => {
  let db: TestDatabase;
  let server: ScriptedServer;
  let app: INestApplication;

  beforeAll(async () => {
    db = await createTestDatabase('forkaisdk');
    server = await startScriptedServer();
    agentEnv.url = server.url;
    app = await bootApp(db.url, AGENT_WORKFLOWS);
  });
  afterAll(async () => {
    await app?.close();
    await server?.close();
    await db?.drop();
  });

  it('re-asks the model from turn 2; turn 1 and its reads are inherited, the refund is keyed apart', async () => {
    const runs = app.get(RunRepository);
    const { run } = await runs.start(SupportAgentWorkflow, { orderId: 'A-1' });
    expect((await driveUntil(app, db, run.id)).status).toBe('succeeded');
    expect(server.modelRequests.map((r) => r.turn)).toEqual([1, 2, 3]);
    const [original] = [...server.refunds.keys()];

    // The model turns are steps: the second one is where the fork starts.
    const turns = (await runs.checkpoints(run.id)).filter(
      (c) => (c.meta as { requestId?: unknown })?.requestId,
    );
    expect(turns).toHaveLength(3);
    const fork = await runs.fork(run.id, { fromStep: turns[1].stepIndex });
    expect((await driveUntil(app, db, fork.run.id)).status).toBe('succeeded');

    // Turns 2 and 3 asked again, turn 1 not; the reads of turn 1 not made again.
    expect(server.modelRequests.map((r) => r.turn)).toEqual([1, 2, 3, 2, 3]);
    const calls = server.vendorCalls.map((c) => c.what);
    expect(calls.filter((w) => w === 'lookup_order' || w === 'refund_policy')).toHaveLength(2);
    // The new turn's refund went out under the fork's key; the original's stays applied once.
    const keys = [...server.refunds.keys()];
    expect(keys).toHaveLength(2);
    expect(keys[0]).toBe(original);
    expect(original.startsWith(`run_${run.id}:`)).toBe(true);
    expect(keys[1].startsWith(`run_${fork.run.id}:`)).toBe(true);
    const out = (await runs.get(fork.run.id))!.output as { text: string };
    expect(out.text).toBe('Refunded 1250 cents for order A-1 (refund rf_2).');
  });
});

describe('fork an OpenAI Agents SDK run from a model turn', () => {
  let db: TestDatabase;
  let server: AgentsServer;
  let app: INestApplication;

  beforeAll(async () => {
    db = await createTestDatabase('forkagents');
    server = await startAgentsServer();
    agentsEnv.url = server.url;
    app = await bootApp(db.url, AGENTS_WORKFLOWS);
  });
  afterAll(async () => {
    await app?.close();
    await server?.close();
    await db?.drop();
  });

  it('from the handoff turn: the handoff and the answer asked again, the read and the refund inherited', async () => {
    const runs = app.get(RunRepository);
    const { run } = await runs.start(AgentsSupportWorkflow, { orderId: 'A-1' });
    const done = await driveUntil(app, db, run.id);
    expect(done.status).toBe('succeeded');
    const checkpoints = await runs.checkpoints(run.id);
    const handoff = checkpoints.filter((c) => c.stepName.startsWith('model:'))[1];
    const vendorBefore = server.vendorCalls.length;

    const fork = await runs.fork(run.id, { fromStep: handoff.stepIndex });
    const forked = await driveUntil(app, db, fork.run.id);
    expect(forked.status).toBe('succeeded');
    expect(server.modelRequests.map((r) => [r.turn, r.agent])).toEqual([
      [1, 'triage'],
      [2, 'triage'],
      [3, 'receipts'],
      [2, 'triage'],
      [3, 'receipts'],
    ]);
    expect(server.vendorCalls).toHaveLength(vendorBefore); // no read, no refund sent again
    expect(server.refunds.size).toBe(1);
    expect((forked.output as { finalOutput: string }).finalOutput).toBe(
      (done.output as { finalOutput: string }).finalOutput,
    );
  });
});
