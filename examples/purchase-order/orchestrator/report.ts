/**
 * The comparison: what each side cost, computed from the vendors' own ledger (effects and calls per
 * purchase order), the app's own tables (account activations per order, accounts.ts) and, for
 * recovery delays, the naive queue's and the durable event trail's timings.
 */
import { CHAPTER_FIGURES, CREDIT_ENQUIRY_EUR } from '../config';
import { EFFECT_KINDS, Ledger } from '../simulated/ledger';

export interface SideReport {
  runs: number;
  completed: number;
  declined: number;
  interruptedRuns: number;
  /** Naive: deliveries after the first (each restarts at step one). Durable: claims after an interruption. */
  pickedUpAgain: number;
  creditEnquiries: { total: number; duplicate: number; duplicateEur: number; spendEur: number };
  charges: { total: number; duplicate: number; runsCharged: number; runsChargedTwice: number };
  shipments: { total: number; duplicate: number };
  notifications: { total: number; duplicate: number };
  /** Rows of the side's `account_activations` table: one per activation, so a repeat is a second row. */
  accountActivations: { total: number; duplicate: number };
  /** Runs whose supplier received more than one order number for the same purchase order. */
  conflictingSupplierOrderNumbers: number;
  modelTokens: { calls: number; prompt: number; reSpent: number };
  stepsExecutedAgain: number;
  lineItemsPricedAgain: number;
  lookupsByKey: number;
  recovery: { count: number; longestMs: number; p50Ms: number; p95Ms: number };
  /** Median wall-clock length of the runs the deploy did not touch (start to finish). */
  medianUninterruptedRunMs: number;
}

export interface DemoReport {
  scenario: Record<string, unknown>;
  naive: SideReport;
  durable: SideReport;
  chapter: typeof CHAPTER_FIGURES;
  extra: Record<string, unknown>;
}

const pct = (xs: number[], p: number) => {
  if (!xs.length) return 0;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

/** Everything the vendors saw for these orders. */
export function fromLedger(
  ledger: Ledger,
  refs: string[],
  extra: {
    completed: number;
    declined: number;
    interruptedRuns: number;
    pickedUpAgain: number;
    recoveryDelaysMs: number[];
    uninterruptedRunMs: number[];
    /** Activation rows per order reference, read from the side's table (accounts.ts). */
    activations: Map<string, number>;
  },
): SideReport {
  const r: SideReport = {
    runs: refs.length,
    completed: extra.completed,
    declined: extra.declined,
    interruptedRuns: extra.interruptedRuns,
    pickedUpAgain: extra.pickedUpAgain,
    creditEnquiries: { total: 0, duplicate: 0, duplicateEur: 0, spendEur: 0 },
    charges: { total: 0, duplicate: 0, runsCharged: 0, runsChargedTwice: 0 },
    shipments: { total: 0, duplicate: 0 },
    notifications: { total: 0, duplicate: 0 },
    accountActivations: { total: 0, duplicate: 0 },
    conflictingSupplierOrderNumbers: 0,
    modelTokens: { calls: 0, prompt: 0, reSpent: 0 },
    stepsExecutedAgain: 0,
    lineItemsPricedAgain: 0,
    lookupsByKey: ledger.lookups,
    recovery: {
      count: extra.recoveryDelaysMs.length,
      longestMs: Math.round(Math.max(0, ...extra.recoveryDelaysMs)),
      p50Ms: Math.round(pct(extra.recoveryDelaysMs, 50)),
      p95Ms: Math.round(pct(extra.recoveryDelaysMs, 95)),
    },
    medianUninterruptedRunMs: Math.round(pct(extra.uninterruptedRunMs, 50)),
  };
  const again = (n: number) => Math.max(0, n - 1);
  for (const ref of refs) {
    const activations = extra.activations.get(ref) ?? 0;
    r.accountActivations.total += activations;
    r.accountActivations.duplicate += again(activations);
    r.stepsExecutedAgain += again(activations);
    const o = ledger.orders.get(ref);
    if (!o) continue;
    const e = o.effects;
    r.creditEnquiries.total += e.credit_check;
    r.creditEnquiries.duplicate += again(e.credit_check);
    r.charges.total += e.charge_card;
    r.charges.duplicate += again(e.charge_card);
    if (e.charge_card > 0) r.charges.runsCharged++;
    if (e.charge_card > 1) r.charges.runsChargedTwice++;
    r.shipments.total += e.book_shipment;
    r.shipments.duplicate += again(e.book_shipment);
    r.notifications.total += e.notify_buyer + e.notify_supplier;
    r.notifications.duplicate += again(e.notify_buyer) + again(e.notify_supplier);
    if (o.supplierOrderNumbers.size > 1) r.conflictingSupplierOrderNumbers++;
    r.modelTokens.calls += o.modelCalls;
    r.modelTokens.prompt += o.promptTokens;
    if (o.modelCalls > 1)
      r.modelTokens.reSpent += Math.round((o.promptTokens * (o.modelCalls - 1)) / o.modelCalls);
    let quoteRuns = 0;
    for (const b of o.priceRequests.values()) {
      quoteRuns = Math.max(quoteRuns, b.requests);
      r.lineItemsPricedAgain += again(b.requests) * b.items;
    }
    r.stepsExecutedAgain +=
      again(o.modelCalls) +
      again(o.supplierLookups) +
      again(quoteRuns) +
      EFFECT_KINDS.reduce((sum, k) => sum + again(o.requests[k]), 0);
  }
  r.creditEnquiries.duplicateEur = round2(r.creditEnquiries.duplicate * CREDIT_ENQUIRY_EUR);
  r.creditEnquiries.spendEur = round2(r.creditEnquiries.total * CREDIT_ENQUIRY_EUR);
  return r;
}

const round2 = (x: number) => Math.round(x * 100) / 100;
const int = (n: number) => n.toLocaleString('en-US');
const eur = (n: number) => `€${n.toFixed(2)}`;
const tokens = (n: number) =>
  n >= 1e6 ? `${(n / 1e6).toFixed(2)} M` : n >= 1e4 ? `${Math.round(n / 1e3)} k` : int(n);
const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/** The side-by-side table (plain text, fixed width). */
export function renderTable(rep: DemoReport): string {
  const n = rep.naive;
  const d = rep.durable;
  const c = rep.chapter;
  const rows: [string, string, string, string][] = [
    ['', 'naive (state in memory)', 'durable (this module)', `the chapter (${int(c.runs)} runs)`],
    [
      'runs completed',
      `${int(n.completed)} / ${int(n.runs)}`,
      `${int(d.completed)} / ${int(d.runs)}`,
      int(c.runs),
    ],
    ['runs interrupted by the deploy', int(n.interruptedRuns), int(d.interruptedRuns), int(c.runs)],
    ['  ... restarted at step one', int(n.pickedUpAgain), '0', int(c.runs)],
    ['  ... resumed from their checkpoint', '0', int(d.pickedUpAgain), '-'],
    [
      'duplicate credit enquiries',
      `${int(n.creditEnquiries.duplicate)} (${eur(n.creditEnquiries.duplicateEur)})`,
      `${int(d.creditEnquiries.duplicate)} (${eur(d.creditEnquiries.duplicateEur)})`,
      `${int(c.duplicateCreditEnquiries)} (€${c.duplicateCreditEur})`,
    ],
    [
      '  credit spend, total',
      eur(n.creditEnquiries.spendEur),
      eur(d.creditEnquiries.spendEur),
      `€${c.creditSpendEur}`,
    ],
    [
      'duplicate charges',
      `${int(n.charges.duplicate)} (of ${int(n.charges.runsCharged)} runs charged)`,
      `${int(d.charges.duplicate)} (of ${int(d.charges.runsCharged)} runs charged)`,
      `${c.doubleCharges} (of ${c.runsThatHadCharged} that had charged)`,
    ],
    ['duplicate shipments booked', int(n.shipments.duplicate), int(d.shipments.duplicate), '-'],
    ['duplicate notifications', int(n.notifications.duplicate), int(d.notifications.duplicate), '-'],
    [
      'duplicate account activations',
      int(n.accountActivations.duplicate),
      int(d.accountActivations.duplicate),
      '-',
    ],
    [
      'supplier sent 2+ order numbers',
      int(n.conflictingSupplierOrderNumbers),
      int(d.conflictingSupplierOrderNumbers),
      '-',
    ],
    [
      're-spent model tokens (input)',
      tokens(n.modelTokens.reSpent),
      tokens(d.modelTokens.reSpent),
      `${tokens(c.reSpentTokens)} (14,000 × ${int(c.runs)})`,
    ],
    ['steps executed again', int(n.stepsExecutedAgain), int(d.stepsExecutedAgain), '-'],
    ['line items priced again', int(n.lineItemsPricedAgain), int(d.lineItemsPricedAgain), '-'],
    ['in-doubt calls settled by lookup', '-', int(d.lookupsByKey), '-'],
    [
      'longest recovery delay',
      n.recovery.count ? secs(n.recovery.longestMs) : '-',
      d.recovery.count ? secs(d.recovery.longestMs) : '-',
      '-',
    ],
    [
      'a run, start to finish (median, untouched)',
      n.medianUninterruptedRunMs ? secs(n.medianUninterruptedRunMs) : '-',
      d.medianUninterruptedRunMs ? secs(d.medianUninterruptedRunMs) : '-',
      'about 6 min',
    ],
  ];
  const w = [0, 1, 2, 3].map((i) => Math.max(...rows.map((r) => r[i].length)));
  const line = (r: string[]) =>
    r
      .map((cell, i) => cell.padEnd(w[i]))
      .join('   ')
      .trimEnd();
  const out = [line(rows[0]), w.map((x) => '─'.repeat(x)).join('   ')];
  for (const r of rows.slice(1)) out.push(line(r));
  return out.join('\n');
}
