import { INestApplication } from '@nestjs/common';
import { DurableStep, DurableWorkflow, RunRepository } from '../../src';
import { InvalidOptionsError } from '../../src/errors/invalid-options.error';
import { DurableWorker } from '../../src/engine/worker.service';
import { RunStatsReader } from '../../src/store/run-stats.reader';
import { bootApp, bootError, durableModule } from '../helpers/app';
import { createTestDatabase, TestDatabase } from '../helpers/database';
import { waitFor } from '../helpers/processes';

const calls: Array<{ runId: string; at: number }> = [];
let flaky = 0;

class Llm {
  @DurableStep({ name: 'ask', kind: 'model', budget: 'rpm' })
  async ask(runId: string) {
    calls.push({ runId, at: Date.now() });
    return { text: 'ok', usage: { input_tokens: 3, output_tokens: 4 } };
  }
  /** Fails twice in a row, then answers: every attempt is charged. */
  @DurableStep({
    name: 'flaky_ask',
    kind: 'model',
    budget: 'roomy',
    retry: { maxAttempts: 3, initialDelayMs: 1 },
  })
  async flakyAsk() {
    if (++flaky % 3) throw new Error('503 from the provider');
    return { usage: { total_tokens: 9 } };
  }
  @DurableStep({ name: 'big_ask', kind: 'model', budget: 'tpm' })
  async bigAsk() {
    return { usage: { total_tokens: 70 } };
  }
}

@DurableWorkflow('budgeted')
class Budgeted {
  constructor(private readonly llm: Llm) {}
  async run(input: { id: string }) {
    return this.llm.ask(input.id);
  }
}

@DurableWorkflow('budgeted-flaky')
class BudgetedFlaky {
  constructor(private readonly llm: Llm) {}
  async run() {
    return this.llm.flakyAsk();
  }
}

@DurableWorkflow('budgeted-tokens')
class BudgetedTokens {
  constructor(private readonly llm: Llm) {}
  async run() {
    return this.llm.bigAsk();
  }
}

const BUDGETS = {
  rpm: { requests: 2, periodMs: 1000 },
  roomy: { requests: 100, tokens: 10_000 },
  tpm: { tokens: 100, periodMs: 1000, estimateTokens: 40 },
};

/** Model budgets: requests and tokens per window for the whole fleet, over-budget calls parked. */
describe('model budgets', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let runs: RunRepository;
  let worker: DurableWorker;

  beforeAll(async () => {
    db = await createTestDatabase('model_budgets');
    app = await bootApp(db.url, [Llm, Budgeted, BudgetedFlaky, BudgetedTokens], { budgets: BUDGETS });
    runs = app.get(RunRepository);
    worker = app.get(DurableWorker);
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  async function drive(ids: string[], timeoutMs = 15_000) {
    await waitFor(
      async () => {
        await worker.tick();
        await worker.idle();
        const views = await Promise.all(ids.map((id) => runs.get(id)));
        return views.every((v) => v!.status === 'succeeded');
      },
      timeoutMs,
      'every run to succeed',
    );
  }
  const uses = async (budget: string) =>
    (await db.query(
      `select run_id, step, (extract(epoch from at) * 1000)::float8 as at, tokens::int as tokens from ai_budget_use where budget = $1 order by at, id`,
      [budget],
    )) as Array<{ run_id: string; step: number; at: number; tokens: number }>;

  it('admits at most `requests` calls in any window; the rest park, holding no worker, and run later', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) ids.push((await runs.start(Budgeted, { id: `r${i}` })).run.id);
    await worker.tick();
    await worker.idle();
    // One claim took all six: two were admitted, four parked on the budget (not running, not failed).
    const parked = await db.query(
      `select id, parked_reason from ai_runs where kind = 'budgeted' and status = 'waiting'`,
    );
    expect(parked).toHaveLength(4);
    expect(parked.every((r: any) => r.parked_reason === 'over model budget "rpm"')).toBe(true);
    expect(worker.inFlightCount).toBe(0);
    await drive(ids);
    const rows = await uses('rpm');
    expect(rows).toHaveLength(6); // every call admitted once: the parked ones were charged when they ran
    expect(calls).toHaveLength(6);
    for (let j = 2; j < rows.length; j++) expect(rows[j].at - rows[j - 2].at).toBeGreaterThanOrEqual(1000);
    const waits = await db.query(`select payload from ai_events where event_type = 'model.budget_wait'`);
    expect(waits.length).toBeGreaterThanOrEqual(4);
    expect(waits[0].payload).toMatchObject({ budget: 'rpm', name: 'ask', step: 0 });
    expect(rows.map((r) => Number(r.tokens))).toEqual([7, 7, 7, 7, 7, 7]); // usage charged after each call
    const { budgets } = await app.get(RunStatsReader).read();
    const rpm = budgets.find((b) => b.name === 'rpm')!;
    expect(rpm).toMatchObject({ requests: 2, tokens: null, periodMs: 1000 });
    expect(rpm.usedRequests).toBeLessThanOrEqual(2);
    expect(rpm.usedTokens).toBe(rpm.usedRequests * 7);
  });

  it('charges every attempt, the retries inside one claim included', async () => {
    const { run } = await runs.start(BudgetedFlaky, {});
    await drive([run.id]);
    const rows = (await uses('roomy')).filter((r) => r.run_id === run.id);
    expect(rows).toHaveLength(3);
    expect(rows.map((r) => Number(r.tokens))).toEqual([0, 0, 9]); // failed attempts keep their estimate
  });

  it('admits on the estimate, charges the usage, and keeps every window within the token budget', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) ids.push((await runs.start(BudgetedTokens, {})).run.id);
    await drive(ids);
    const rows = await uses('tpm');
    expect(rows.map((r) => Number(r.tokens))).toEqual([70, 70, 70, 70]);
    // Two calls fit on their estimates (40 + 40 <= 100) and used 140; a third (140 + 40 > 100) waited
    // until both had left the window: never more than two in any window.
    for (let j = 2; j < rows.length; j++) expect(rows[j].at - rows[j - 2].at).toBeGreaterThanOrEqual(1000);
    const waits = await db.query(
      `select count(*)::int as n from ai_events where event_type = 'model.budget_wait' and payload->>'budget' = 'tpm'`,
    );
    expect(waits[0].n).toBeGreaterThan(0);
  });

  it('refuses a step drawing on an undeclared budget, and bad budgets, at boot', async () => {
    const err = await bootError({ imports: [durableModule(db.url)], providers: [Llm] });
    expect(String((err as Error).message)).toMatch(/budget 'rpm', which the module's budgets do not declare/);
    const bad = await bootError({
      imports: [
        durableModule(db.url, { budgets: { x: { requests: 0 }, 'no spaces': { tokens: 5 }, y: {} } as any }),
      ],
    });
    expect(bad).toBeInstanceOf(InvalidOptionsError);
    expect((bad as Error).message).toMatch(/budgets\.x\.requests: must be an integer from 1/);
    expect((bad as Error).message).toMatch(/budgets\.no spaces: a budget name is/);
    expect((bad as Error).message).toMatch(/budgets\.y: give requests, tokens or both/);
  });
});
