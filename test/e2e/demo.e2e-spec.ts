import { runDemo } from '../../examples/purchase-order/demo';
import { createTestDatabase, TestDatabase } from '../helpers/database';

/**
 * The README's first command, small: 50 purchase orders, 2 worker processes per side, a rolling deploy
 * with one SIGTERM (drained) and one SIGKILL per side. The durable side must not repeat a single
 * external write; the naive side must show the damage the chapter describes.
 */
describe('purchase-order demo (naive vs durable under a rolling deploy)', () => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase('demo');
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('50 runs: durable has 0 duplicate charges and 0 duplicate credit enquiries; naive has both', async () => {
    const report = await runDemo({
      runs: 50,
      workers: 2,
      timeScaleMs: 15,
      databaseUrl: db.url,
      databaseAsIs: true,
      reportPath: null,
      progress: 'silent',
      timeoutMs: 60_000,
    });
    const { naive, durable } = report;
    console.log(
      `demo e2e: naive ${naive.creditEnquiries.duplicate} dup. enquiries, ${naive.charges.duplicate} dup. charges, ` +
        `${naive.modelTokens.reSpent} tokens re-spent; durable interrupted ${durable.interruptedRuns} runs, ` +
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

    expect(naive.completed).toBe(50);
    expect(naive.interruptedRuns).toBeGreaterThan(0);
    expect(naive.creditEnquiries.duplicate).toBeGreaterThan(0);
    expect(naive.modelTokens.reSpent).toBeGreaterThan(0);

    // The recorded model usage sits in the checkpoints: about 14,000 input tokens per parse.
    const [{ n, avg }] = await db.query(
      `select count(*)::int as n, avg((meta->'usage'->>'prompt_tokens')::int)::int as avg
         from ai_checkpoints where step_name = 'parse_request'`,
    );
    expect(n).toBe(50);
    expect(avg).toBeGreaterThan(13_000);
    expect(avg).toBeLessThan(15_000);
  }, 120_000);
});
