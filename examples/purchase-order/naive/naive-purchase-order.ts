/**
 * The baseline: the service as it was before the incident. The same nine steps, the same provider
 * classes and the same vendors, but the run's state lives in local variables of this function, and the
 * queue message that started it is deleted only when it returns. A worker that dies takes the state
 * with it; the redelivered message starts the run again at step one.
 *
 * The decorated methods are plain methods outside a durable run, so this calls exactly the code the
 * durable workflow calls. The commands get a fresh idempotency key per call, as a client library that
 * generates one per request would: that protects a network retry, not a restart.
 */
import { randomUUID } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import type { CommandContext } from '../../../src';
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

@Injectable()
export class NaivePurchaseOrder {
  constructor(
    private readonly agent: PurchaseOrderAgent,
    private readonly credit: CreditBureau,
    private readonly payments: PaymentGateway,
    private readonly carrier: Carrier,
    private readonly notifier: Notifier,
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
    await this.agent.activateAccount(orderRef, request.buyerId);
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
