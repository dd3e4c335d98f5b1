/**
 * The vendors' side of the story: every request and every effect the simulated services saw, per
 * purchase order. This is the ground truth the report is computed from; neither side's workers can
 * hide anything from it.
 */
export interface OrderLedger {
  modelCalls: number;
  promptTokens: number;
  completionTokens: number;
  supplierLookups: number;
  /** Price requests per batch start index (a batch priced twice was looked up again). */
  priceRequests: Map<number, { requests: number; items: number }>;
  /** Effect-bearing requests (POST/PUT) and effects applied, per vendor operation. */
  requests: Record<EffectKind, number>;
  effects: Record<EffectKind, number>;
  /** Distinct order numbers the supplier's portal received for this purchase order. */
  supplierOrderNumbers: Set<string>;
}

/** The vendors' effects. (Marking the account active is a write to the app's own tables: accounts.ts.) */
export type EffectKind =
  'credit_check' | 'charge_card' | 'book_shipment' | 'notify_buyer' | 'notify_supplier';

export const EFFECT_KINDS: EffectKind[] = [
  'credit_check',
  'charge_card',
  'book_shipment',
  'notify_buyer',
  'notify_supplier',
];

const zero = (): Record<EffectKind, number> => ({
  credit_check: 0,
  charge_card: 0,
  book_shipment: 0,
  notify_buyer: 0,
  notify_supplier: 0,
});

/** Per-order counters, plus a running total of duplicate effects for the live progress line. */
export class Ledger {
  readonly orders = new Map<string, OrderLedger>();
  duplicateEnquiries = 0;
  duplicateCharges = 0;
  /** Lookups by idempotency key (how in-doubt commands were settled). */
  lookups = 0;

  order(ref: string): OrderLedger {
    let o = this.orders.get(ref);
    if (!o) {
      o = {
        modelCalls: 0,
        promptTokens: 0,
        completionTokens: 0,
        supplierLookups: 0,
        priceRequests: new Map(),
        requests: zero(),
        effects: zero(),
        supplierOrderNumbers: new Set(),
      };
      this.orders.set(ref, o);
    }
    return o;
  }

  effect(ref: string, kind: EffectKind): void {
    const o = this.order(ref);
    o.effects[kind]++;
    if (o.effects[kind] > 1 && kind === 'credit_check') this.duplicateEnquiries++;
    if (o.effects[kind] > 1 && kind === 'charge_card') this.duplicateCharges++;
  }
}
