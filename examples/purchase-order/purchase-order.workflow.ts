/**
 * The chapter's nine-step purchase-order agent as a durable workflow. `run()` is ordinary async code;
 * after a crash or a deploy another worker replays it from the top, and every step that already
 * committed returns its recorded result at once, so the run continues from the step it had reached.
 */
import { DurableWorkflow, RunContext } from '../../src'; // in an app: 'nestjs-durable-execution'
import { PurchaseOrderAgent, PurchaseOrderInput } from './purchase-order.agent';
import { Carrier, CreditBureau, Notifier, PaymentGateway } from './vendors';

export interface PurchaseOrderResult {
  orderRef: string;
  status: 'placed' | 'declined';
  supplierOrderNo?: string;
  totalCents: number;
  chargeId?: string;
  shipmentId?: string;
}

// maxAttempts counts claims that made no progress (a deploy or a lost lease between two commits).
@DurableWorkflow('purchase-order', { maxAttempts: 20 })
export class PurchaseOrderWorkflow {
  constructor(
    private readonly agent: PurchaseOrderAgent,
    private readonly credit: CreditBureau,
    private readonly payments: PaymentGateway,
    private readonly carrier: Carrier,
    private readonly notifier: Notifier,
  ) {}

  async run(order: PurchaseOrderInput, ctx: RunContext): Promise<PurchaseOrderResult> {
    const { orderRef } = order;
    const request = await this.agent.parseRequest(order); // 1. model step, ~14,000 input tokens
    const supplier = await this.agent.resolveSupplier(orderRef, request.supplierHint); // 2.
    const quote = await this.agent.buildQuote(orderRef, supplier.supplierId, request.lines); // 3. 240 lines
    const buyer = { orderRef, buyerId: request.buyerId };

    const credit = await this.credit.check({ ...buyer, amountCents: quote.totalCents }); // 4. €0.40
    if (!credit.approved) return { orderRef, status: 'declined', totalCents: quote.totalCents };
    const charge = await this.payments.charge({ ...buyer, amountCents: quote.totalCents }); // 5.
    const shipment = await this.carrier.book({
      orderRef,
      supplierId: supplier.supplierId,
      lineItems: quote.lineItems,
    }); // 6.
    await this.agent.activateAccount(orderRef, request.buyerId); // 7.

    // Recorded on first use: a resumed run sends the supplier the order number it already sent.
    const supplierOrderNo = ctx.uuid();
    await this.notifier.notifyBuyer({ ...buyer, chargeId: charge.chargeId, shipmentId: shipment.shipmentId }); // 8.
    await this.notifier.notifySupplier({
      orderRef,
      supplierId: supplier.supplierId,
      supplierOrderNo,
      totalCents: quote.totalCents,
    }); // 9.
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
