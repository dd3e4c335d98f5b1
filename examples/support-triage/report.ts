/** The demo's table: what the model server and the vendors counted, uninterrupted beside crashed. */
import type { ScenarioReport, TriageDemoReport } from './demo';

/**
 * The demo's claims, checked: the same answer as the uninterrupted run; one refund (one per toolCallId)
 * and one email; no more model requests than turns plus the one in flight at the kill; each turn
 * requested before the kill (it had committed) not requested again; a repeated POST of the ticket
 * answered with the same run.
 */
export function verdict(uninterrupted: ScenarioReport, crashed: ScenarioReport) {
  const turns = uninterrupted.output?.turns ?? 0;
  const perCall = Object.values(crashed.ledger.refundsPerToolCall);
  const before = crashed.requestsBeforeKill ?? [];
  const sameAnswer = crashed.answer !== null && crashed.answer === uninterrupted.answer;
  const ok =
    sameAnswer &&
    crashed.ledger.refundsApplied === 1 &&
    perCall.length === 1 &&
    perCall[0] === 1 &&
    crashed.ledger.emailsSent === 1 &&
    crashed.repeatedPost.status === 200 &&
    crashed.repeatedPost.sameRun &&
    crashed.modelRequests.length <= turns + 1 &&
    before.every((t) => crashed.modelRequests.filter((x) => x === t).length === 1);
  return { turns, sameAnswer, ok };
}

const byTurn = (turns: number[]) => `${turns.join(' ')}  (${turns.length})`;

function rows(s: ScenarioReport): string[] {
  const l = s.ledger;
  const perCall = Object.values(l.refundsPerToolCall);
  const settled = s.commands.filter((c) => c.resolution).map((c) => `${c.name}: ${c.resolution}`);
  return [
    s.processes.map((p) => `${p.name} (${p.ended})`).join(', '),
    String(s.epoch),
    byTurn(s.modelRequests),
    s.requestsBeforeKill ? byTurn(s.requestsBeforeKill) : '-',
    `${l.orderLookups} / ${l.customerLookups}`,
    `${l.refundsApplied} (per toolCallId: ${perCall.join(', ') || '-'})`,
    `${l.refundRequests} / ${l.refundLookups}`,
    `${l.emailsSent} (${l.emailRequests} sent)`,
    settled.join('; ') || '-',
    `${s.repeatedPost.status}${s.repeatedPost.sameRun ? ', the same run' : ', ANOTHER run'}`,
    `${(s.ms / 1000).toFixed(1)} s${s.takeoverMs !== undefined ? ` (${(s.takeoverMs / 1000).toFixed(1)} s after the kill)` : ''}`,
  ];
}

const LABELS = [
  'app processes (how each ended)',
  'run epoch (claims)',
  'model requests, by turn',
  '  ... before the SIGKILL (committed)',
  'order / customer lookups',
  'refunds applied at the payment vendor',
  'refund requests / lookups by key',
  'emails sent by the mail vendor',
  'in-doubt commands settled',
  'POST /tickets again, same ticket',
  'ticket, POST to answer',
];

export function renderReport(r: TriageDemoReport): string[] {
  const a = rows(r.uninterrupted);
  const b = rows(r.crashed);
  const w0 = Math.max(...LABELS.map((x) => x.length)) + 3;
  const w1 = Math.max(...a.map((x) => x.length), 13) + 3;
  const line = (x: string, y: string, z: string) => `${x.padEnd(w0)}${y.padEnd(w1)}${z}`;
  const out = [
    '',
    line('', 'uninterrupted', 'crashed, taken over'),
    line('─'.repeat(w0 - 3), '─'.repeat(w1 - 3), '─'.repeat(Math.max(...b.map((x) => x.length)))),
    ...LABELS.map((label, i) => line(label, a[i], b[i])),
    '',
    `answer, uninterrupted:  ${r.uninterrupted.answer}`,
    `answer, crashed:        ${r.crashed.answer}`,
    '',
    r.sameAnswer ? 'The same answer.' : 'The answers DIFFER.',
    r.ok
      ? `One refund and one email; the ${r.crashed.requestsBeforeKill?.length ?? 0} model turns committed before the kill ` +
        `were not requested again (${r.crashed.modelRequests.length} requests for ${r.turns} turns). The refund ` +
        'in flight was settled by asking the payment vendor by its key.'
      : 'NOT OK: see the table (worker logs in ' + r.logDir + ').',
  ];
  return out;
}
