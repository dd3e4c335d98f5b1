/**
 * The baseline: the service as it was before the incident. The same nine steps, the same provider
 * classes and the same vendors, but the run's state lives in local variables of this function, and the
 * queue message that started it is deleted only when it returns. A worker that dies takes the state
 * with it; the redelivered message starts the run again at step one.
 *
 * The decorated steps and commands are plain methods outside a durable run, so this calls exactly the
 * code the durable workflow calls. The commands get a fresh idempotency key per call, as a client
 * library that generates one per request would: that protects a network retry, not a restart. Step 7
 * sends the durable side's statements (accounts.ts) to this side's own tables, each a plain write of its
 * own, as the service did before: a restarted run writes them again.
 */
import { randomUUID } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import type { CommandContext } from '../../../src';
import { NAIVE_ACCOUNTS, Queryable, writeActivation } from '../accounts';
import { PurchaseOrderAgent, PurchaseOrderInput } from '../purchase-order.agent';
import type { PurchaseOrderResult } from '../purchase-order.workflow';
import { Carrier, CreditBureau, Notifier, PaymentGateway } from '../vendors';

/** The nine steps in order, for progress reports (the index is what a restart goes back to). */
export const STEP_NAMES = [
  'parse_request',
  'resolve_supplier',
  'build_quote',
  'credit_check',
  'charge_card',
  'book_shipment',
  'activate_account',
  'notify_buyer',
  'notify_supplier',
] as const;

/** The naive side's database (a pg Pool): where its account activations go. */
export const NAIVE_DB = Symbol('NAIVE_DB');

@Injectable()
export class NaivePurchaseOrder {
  constructor(
    private readonly agent: PurchaseOrderAgent,
    private readonly credit: CreditBureau,
    private readonly payments: PaymentGateway,
    private readonly carrier: Carrier,
    private readonly notifier: Notifier,
    @Inject(NAIVE_DB) private readonly db: Queryable,
  ) {}

  async run(order: PurchaseOrderInput, onStep: (index: number) => void): Promise<PurchaseOrderResult> {
    const fresh = (): CommandContext => ({
      idempotencyKey: randomUUID(),
      signal: new AbortController().signal,
      fence: { runId: 'naive', epoch: 0, timeline: 0, leaseExpiresAt: new Date(8.64e15) }, // no lease: no run
    });
    const { orderRef } = order;
    onStep(0);
    const request = await this.agent.parseRequest(order);
    onStep(1);
    const supplier = await this.agent.resolveSupplier(orderRef, request.supplierHint);
    onStep(2);
    const quote = await this.agent.buildQuote(orderRef, supplier.supplierId, request.lines);
    const buyer = { orderRef, buyerId: request.buyerId };
    onStep(3);
    const credit = await this.credit.check({ ...buyer, amountCents: quote.totalCents }, fresh());
    if (!credit.approved) return { orderRef, status: 'declined', totalCents: quote.totalCents };
    onStep(4);
    const charge = await this.payments.charge({ ...buyer, amountCents: quote.totalCents }, fresh());
    onStep(5);
    const shipment = await this.carrier.book(
      { orderRef, supplierId: supplier.supplierId, lineItems: quote.lineItems },
      fresh(),
    );
    onStep(6);
    await writeActivation(this.db, NAIVE_ACCOUNTS, orderRef, request.buyerId); // a plain write, no transaction
    const supplierOrderNo = randomUUID(); // a new number on every restart
    onStep(7);
    await this.notifier.notifyBuyer(
      { ...buyer, chargeId: charge.chargeId, shipmentId: shipment.shipmentId },
      fresh(),
    );
    onStep(8);
    await this.notifier.notifySupplier(
      { orderRef, supplierId: supplier.supplierId, supplierOrderNo, totalCents: quote.totalCents },
      fresh(),
    );
    return {
      orderRef,
      status: 'placed',
      supplierOrderNo,
      totalCents: quote.totalCents,
      chargeId: charge.chargeId,
      shipmentId: shipment.shipmentId,
    };
  }
}
