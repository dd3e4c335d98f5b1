/**
 * docs/AI-SDK.md, "Model budgets apply": `durableModel(ctx, model, { budget })` admits each request of
 * the AI SDK's tool loop on the named budget and charges the turn's `totalTokens` (docs/FLOW-CONTROL.md).
 * The budget's used tokens are the sum of the turns' totalTokens as the SDK counted them; a budget
 * spent (tokens, or requests) parks the run before the next request is sent (requests counted at the
 * server), and the replay after the park charges no committed turn again. The crash case (a worker
 * SIGKILLed mid-turn; the committed turn not charged again, the cut-off attempt its estimate) is in
 * ai-sdk-stream-takeover.e2e-spec.ts.
 */
import { INestApplication } from '@nestjs/common';
import { generateText } from 'ai';
import { DurableWorkflow, RunContext, RunRepository } from '../../src';
import { durableModel, durableTools } from '../../src/ai-sdk';
import { RunStatsReader } from '../../src/store/run-stats.reader';
import { bootApp } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { driveUntil } from '../helpers/drive';
import { ScriptedServer, startScriptedServer } from '../helpers/scripted-openai';
import { agentCall, agentEnv, chatModel, supportTools } from '../fixtures/ai-agent-app';

const ANSWER = 'Refunded 1250 cents for order A-1 (refund rf_1).';

/** The support agent (refund as a command) with its model on the budget named in its input. */
@DurableWorkflow('ai-budgeted', { maxAttempts: 5 })
class BudgetedAgentWorkflow {
  async run(input: { budget: string }, ctx: RunContext) {
    const result = await generateText(
      agentCall(
        durableModel(ctx, chatModel(), { budget: input.budget }),
        durableTools(ctx, supportTools(), { commands: ['refund'] }),
      ),
    );
    return {
      text: result.text,
      stepTokens: result.steps.map((s) => s.usage.totalTokens),
      totalTokens: result.totalUsage.totalTokens,
    };
  }
}

const BUDGETS = {
  roomy: { requests: 100, tokens: 100_000, periodMs: 3_600_000 },
  // Turn 1 (110) and turn 2 (220) fit; turn 3 finds 330 of 300 used.
  tokens: { tokens: 300, periodMs: 3_600_000 },
  // Two requests an hour: turn 3 is the third.
  requests: { requests: 2, periodMs: 3_600_000 },
};

describe('ai-sdk: model budgets', () => {
  let db: TestDatabase;
  let server: ScriptedServer;
  let app: INestApplication;
  let runs: RunRepository;

  beforeAll(async () => {
    db = await createTestDatabase('aisdkbudget');
    server = await startScriptedServer();
    agentEnv.url = server.url;
    app = await bootApp(db.url, [BudgetedAgentWorkflow], { budgets: BUDGETS });
    runs = app.get(RunRepository);
  });
  afterAll(async () => {
    await app?.close();
    await server?.close();
    await db?.drop();
  });
  beforeEach(() => server.reset());

  const uses = async (runId: string) =>
    (
      await db.query<{ budget: string; step: number; tokens: string }>(
        `select budget, step, tokens from ai_budget_use where run_id = $1 order by id`,
        [runId],
      )
    ).map((u) => [u.budget, u.step, Number(u.tokens)]);
  const modelSteps = async (runId: string) =>
    (await runs.checkpoints(runId)).filter((c) => c.stepName.startsWith('model:')).map((c) => c.stepIndex);

  it("charges each turn's totalTokens to the budget: the budget's use is the sum the SDK counted", async () => {
    const { run } = await runs.start(BudgetedAgentWorkflow, { budget: 'roomy' });
    const done = await driveUntil(app, db, run.id);
    expect(done.status).toBe('succeeded');
    const out = done.output as { text: string; stepTokens: number[]; totalTokens: number };
    expect(out).toEqual({ text: ANSWER, stepTokens: [110, 220, 330], totalTokens: 660 });
    expect(server.modelRequests).toHaveLength(3);
    const [m1, m2, m3] = await modelSteps(run.id);
    // One charge per request, its real usage; the replay check's replay charged nothing.
    expect(await uses(run.id)).toEqual([
      ['roomy', m1, 110],
      ['roomy', m2, 220],
      ['roomy', m3, 330],
    ]);
    const { budgets } = await app.get(RunStatsReader).read();
    expect(budgets.find((b) => b.name === 'roomy')).toMatchObject({ usedRequests: 3, usedTokens: 660 });
  });

  for (const budget of ['tokens', 'requests'] as const) {
    it(`a spent budget (${budget}) parks the run before the next request; the resumed run charges no committed turn again`, async () => {
      const { run } = await runs.start(BudgetedAgentWorkflow, { budget });
      const parked = await driveUntil(app, db, run.id, ['waiting', 'succeeded', 'failed']);
      expect(parked.status).toBe('waiting');
      expect(parked.parkedReason).toBe(`over model budget "${budget}"`);
      // Turn 3 was refused before it was sent: two requests reached the server.
      expect(server.modelRequests.map((r) => r.turn)).toEqual([1, 2]);
      const [m1, m2] = await modelSteps(run.id);
      expect(await uses(run.id)).toEqual([
        [budget, m1, 110],
        [budget, m2, 220],
      ]);
      // Claimed again while the window is still full: parked again, still nothing sent.
      const again = await driveUntil(app, db, run.id, ['waiting', 'succeeded', 'failed']);
      expect(again.status).toBe('waiting');
      expect(server.modelRequests).toHaveLength(2);

      // The window moves on (the calls are an hour old): the run resumes, replays turns 1 and 2 from
      // the record (no request, no charge) and sends turn 3.
      await db.query(`update ai_budget_use set at = at - interval '2 hours' where run_id = $1`, [run.id]);
      const done = await driveUntil(app, db, run.id);
      expect(done.status).toBe('succeeded');
      expect((done.output as { text: string }).text).toBe(ANSWER);
      expect(server.modelRequests.map((r) => r.turn)).toEqual([1, 2, 3]);
      // The hour-old charges were pruned by the charge that admitted turn 3: what is left is what the
      // resumed claim charged, turn 3 alone.
      const [, , m3] = await modelSteps(run.id);
      expect(await uses(run.id)).toEqual([[budget, m3, 330]]);
    });
  }
});
