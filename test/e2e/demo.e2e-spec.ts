import fs from 'node:fs';
import path from 'node:path';
import { DemoResult, runDemo } from '../../examples/purchase-order/demo';
import type { AdminRunDetail } from '../../src/admin';
import { browserTestsRun, CHROMIUM } from '../helpers/browser';
import { createTestDatabase, TestDatabase } from '../helpers/database';

const SHOTS = path.join(__dirname, '..', 'artifacts', 'demo-inspector');

/**
 * The README's first command, small: 50 purchase orders, 2 worker processes per side, a rolling deploy
 * with one SIGTERM (drained) and one SIGKILL per side. The durable side must not repeat a single
 * external write, nor a single account activation (a row of the app's own table, written by a
 * `@DurableTransaction`); the naive side must show the damage the chapter describes. Then, as with
 * `--inspect --screenshot DIR`, the durable runs are in the run inspector: screenshots of the runs and
 * of a run the deploy interrupted (headless Chromium), and the inspector left up behind its key.
 */
describe('purchase-order demo (naive vs durable under a rolling deploy)', () => {
  let db: TestDatabase;
  let result: DemoResult | undefined;

  beforeAll(async () => {
    db = await createTestDatabase('demo');
  });
  afterAll(async () => {
    await result?.inspector?.close();
    await db?.drop();
  });

  it('50 runs: durable has 0 duplicate charges, credit enquiries and account activations; naive has them', async () => {
    fs.rmSync(SHOTS, { recursive: true, force: true });
    const report = (result = await runDemo({
      runs: 50,
      workers: 2,
      timeScaleMs: 15,
      databaseUrl: db.url,
      databaseAsIs: true,
      reportPath: null,
      progress: 'silent',
      timeoutMs: 60_000,
      // Screenshots need Chromium (test/helpers/browser.ts): without it the demo runs without them.
      screenshotDir: browserTestsRun() ? SHOTS : null,
      inspect: { port: 0 },
    }));
    const { naive, durable } = report;
    console.log(
      `demo e2e: naive ${naive.creditEnquiries.duplicate} dup. enquiries, ${naive.charges.duplicate} dup. charges, ` +
        `${naive.modelTokens.reSpent} tokens re-spent, ${naive.accountActivations.duplicate} dup. activations; durable interrupted ${durable.interruptedRuns} runs, ` +
        `${durable.lookupsByKey} lookups, longest recovery ${durable.recovery.longestMs} ms`,
    );

    expect(durable.completed).toBe(50);
    expect(durable.interruptedRuns).toBeGreaterThan(0); // the deploy did hit the durable workers
    expect(durable.charges.duplicate).toBe(0);
    expect(durable.creditEnquiries.duplicate).toBe(0);
    expect(durable.shipments.duplicate).toBe(0);
    expect(durable.notifications.duplicate).toBe(0);
    expect(durable.conflictingSupplierOrderNumbers).toBe(0);
    expect(durable.creditEnquiries.total).toBe(50); // exactly one enquiry per order
    // Exactly one activation row per placed order (a declined order never gets to step 7).
    expect(durable.accountActivations.duplicate).toBe(0);
    expect(durable.accountActivations.total).toBe(durable.completed - durable.declined);

    expect(naive.completed).toBe(50);
    expect(naive.interruptedRuns).toBeGreaterThan(0);
    expect(naive.creditEnquiries.duplicate).toBeGreaterThan(0);
    expect(naive.modelTokens.reSpent).toBeGreaterThan(0);
    // Every placed order activated at least once; a run restarted after step 7 activated again.
    expect(naive.accountActivations.total).toBeGreaterThanOrEqual(naive.completed - naive.declined);
    expect(naive.accountActivations.duplicate).toBeGreaterThanOrEqual(0);

    // The tables themselves: one row per order on the durable side, and each account's counter moved
    // in the same transaction as its rows (as many increments as rows).
    const [rows] = await db.query(
      `select count(*)::int as n, count(distinct order_ref)::int as orders,
              (select coalesce(sum(activations), 0)::int from accounts) as counted
         from account_activations`,
    );
    expect(rows).toEqual({
      n: durable.accountActivations.total,
      orders: durable.accountActivations.total,
      counted: durable.accountActivations.total,
    });
    const [naiveRows] = await db.query(`select count(*)::int as n from naive_account_activations`);
    expect(naiveRows.n).toBe(naive.accountActivations.total);

    // The recorded model usage sits in the checkpoints: about 14,000 input tokens per parse.
    const [{ n, avg }] = await db.query(
      `select count(*)::int as n, avg((meta->'usage'->>'prompt_tokens')::int)::int as avg
         from ai_checkpoints where step_name = 'parse_request'`,
    );
    expect(n).toBe(50);
    expect(avg).toBeGreaterThan(13_000);
    expect(avg).toBeLessThan(15_000);

    // The inspector stays up over the durable side's database, behind its key.
    const inspector = report.inspector!;
    expect(inspector.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/durable$/);
    expect(inspector.key).toMatch(/^[0-9a-f]{24}$/); // made for the process (no DEMO_ADMIN_KEY here)
    expect(inspector.lines[0]).toContain(`${inspector.url}/login#key=${inspector.key}`);
    expect((await fetch(`${inspector.url}/api/stats`)).status).toBe(401);
    const headers = { 'x-api-key': inspector.key! };

    // The screenshots: the runs list and a run the deploy interrupted, taken over or handed over.
    const shots = report.screenshots;
    if (!shots)
      console.log(
        `skipped the inspector screenshots: no Chromium at ${CHROMIUM} (see test/helpers/browser.ts)`,
      );
    else {
      expect(shots.shows).toMatch(/^(takeover|handover) /);
      for (const png of [shots.runsPng, shots.runPng]) {
        expect(path.dirname(png)).toBe(SHOTS);
        expect(fs.readFileSync(png).subarray(1, 4).toString()).toBe('PNG');
        expect(fs.statSync(png).size).toBeGreaterThan(20_000);
      }
      expect((await fetch(`${inspector.url}/api/runs/${shots.runId}`)).status).toBe(401);
      const detail = (await (
        await fetch(`${inspector.url}/api/runs/${shots.runId}`, { headers })
      ).json()) as AdminRunDetail;
      expect(detail.run.status).toBe('succeeded');
      expect(detail.run.epoch).toBeGreaterThanOrEqual(2);
      expect(detail.timeline.workers.length).toBeGreaterThanOrEqual(2);
      expect(detail.timeline.epochs.some((e) => e.start === 'takeover' || e.start === 'handover')).toBe(true);
      const page = await fetch(inspector.url, { headers });
      expect(page.status).toBe(200);
      expect(await page.text()).toContain(`data-run-id="${shots.runId}"`);
    }
    const stats = (await (await fetch(`${inspector.url}/api/stats`, { headers })).json()) as {
      byStatus: Record<string, number>;
    };
    expect(stats.byStatus.succeeded).toBe(50);
  }, 150_000);
});
