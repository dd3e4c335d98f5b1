import { runTriageDemo, TriageDemoReport } from '../../examples/support-triage/demo';
import { createTestDatabase, TestDatabase } from '../helpers/database';

/**
 * Issue 37, part 4: the support-triage example (`npm run demo:agent`). An AI SDK agent (`generateText`
 * with tools: two parallel reads, a refund, an email; a `stopWhen` loop) started by `POST /tickets` in a
 * Nest app process. The same ticket runs twice against fresh loopback servers: once uninterrupted, once
 * with the app process SIGKILLed by the payment vendor right after it applied the refund (before its
 * answer left the vendor), a second app process taking the run over. Real OS processes; the model
 * server and the vendors count every request.
 */
describe('support-triage example: an AI SDK agent SIGKILLed after the refund', () => {
  let db: TestDatabase;
  let report: TriageDemoReport;
  const lines: string[] = [];

  beforeAll(async () => {
    db = await createTestDatabase('triage');
    report = await runTriageDemo({ databaseUrl: db.url, databaseAsIs: true, out: (l) => lines.push(l) });
    console.log(lines.join('\n'));
  }, 120_000);
  afterAll(async () => {
    await db?.drop();
  });

  const ANSWER =
    'Refunded €42.00 for order #1042 (refund re_0001) and emailed ana@example.com (message msg_0001).';

  it('uninterrupted: four turns, each requested once; one refund, one email', () => {
    const { uninterrupted: u, turns } = report;
    expect(u.status).toBe('succeeded');
    expect(u.epoch).toBe(1);
    expect(turns).toBe(4);
    expect(u.modelRequests).toEqual([1, 2, 3, 4]);
    expect(u.answer).toBe(ANSWER);
    expect(u.output!.toolCalls.map((c) => `${c.turn}:${c.tool}`)).toEqual([
      '1:lookup_order',
      '1:lookup_customer', // two parallel tool calls in turn 1
      '2:refund_payment',
      '3:email_customer',
    ]);
    expect(u.ledger).toMatchObject({ refundsApplied: 1, refundRequests: 1, refundLookups: 0, emailsSent: 1 });
  });

  it('crashed: the first process was SIGKILLed with turns 1 and 2 committed; the second finished the run', () => {
    const { crashed: c } = report;
    expect(c.processes.map((p) => p.name)).toEqual(['desk-2', 'desk-3']);
    expect(c.processes[0].ended).toBe('SIGKILL');
    expect(c.status).toBe('succeeded');
    expect(c.epoch).toBe(2); // claimed twice: the victim, then the heir
    expect(c.requestsBeforeKill).toEqual([1, 2]);
    // POST /tickets with the same ticket on the second process: the run it finished, nothing started.
    expect(c.repeatedPost).toEqual({ status: 200, sameRun: true });
    expect(report.uninterrupted.repeatedPost).toEqual({ status: 200, sameRun: true });
  });

  it('one refund per toolCallId at the payment vendor, settled by a lookup by key; one email', () => {
    const { crashed: c } = report;
    const refundCall = c.output!.toolCalls.find((t) => t.tool === 'refund_payment')!;
    expect(c.ledger.refundsPerToolCall).toEqual({ [refundCall.id]: 1 });
    expect(c.ledger.refundsApplied).toBe(1);
    expect(c.ledger.refundRequests).toBe(1); // never sent again: its outcome was asked for
    expect(c.ledger.refundLookups).toBe(1);
    expect(c.ledger.emailsSent).toBe(1);
    expect(c.ledger.emailRequests).toBe(1);
    expect(c.ledger.orderLookups).toBe(1); // a recorded tool step: not run again on the replay
    expect(c.ledger.customerLookups).toBe(1);
    expect(c.commands).toEqual([
      { name: 'refund_payment', status: 'succeeded', resolution: 'lookup' },
      { name: 'email_customer', status: 'succeeded', resolution: null },
    ]);
  });

  it('model requests: the turns plus at most the one in flight; no committed turn requested again', () => {
    const { crashed: c, turns } = report;
    expect(c.modelRequests.length).toBeGreaterThanOrEqual(turns);
    expect(c.modelRequests.length).toBeLessThanOrEqual(turns + 1);
    for (const t of c.requestsBeforeKill!) expect(c.modelRequests.filter((x) => x === t)).toHaveLength(1);
    // Here nothing was in flight at the kill (the model waits on the refund): each turn exactly once.
    expect(c.modelRequests).toEqual([1, 2, 3, 4]);
  });

  it("the same final answer as the uninterrupted run's, and the demo says so", () => {
    expect(report.crashed.answer).toBe(report.uninterrupted.answer);
    expect(report.crashed.answer).toBe(ANSWER);
    expect(report.crashed.output!.toolCalls).toEqual(report.uninterrupted.output!.toolCalls);
    expect(report.sameAnswer).toBe(true);
    expect(report.ok).toBe(true);
    const text = lines.join('\n');
    expect(text).toContain('The same answer.');
    expect(text).toMatch(
      /refunds applied at the payment vendor\s+1 \(per toolCallId: 1\)\s+1 \(per toolCallId: 1\)/,
    );
  });
});
