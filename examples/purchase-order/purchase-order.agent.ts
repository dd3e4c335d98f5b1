/**
 * The agent's own steps. Each `@DurableStep` commits its result as a checkpoint in one fenced SQL
 * statement; once committed, a resumed run gets the stored result back instead of calling again. The
 * account activation writes the app's own tables: a `@DurableTransaction`, whose writes commit in the
 * same transaction as its checkpoint.
 */
import { Inject, Injectable } from '@nestjs/common';
import OpenAI from 'openai';
import { currentRun, DurableStep, DurableTransaction, DurableTransactionHost } from '../../src'; // in an app: 'nestjs-durable-execution'
import { Activation, DURABLE_ACCOUNTS, writeActivation } from './accounts';
import { PRICE_BATCH, type ServiceSettings } from './config';
import { SERVICE_SETTINGS, VendorApi } from './vendors';

/** What the buyer sent (the run's input: stored with the run, so a resume never needs the request). */
export interface PurchaseOrderInput {
  orderRef: string;
  channel: 'portal' | 'email' | 'edi';
  text: string;
}

export interface OrderLine {
  sku: string;
  qty: number;
}

export interface ParsedRequest {
  buyerId: string;
  supplierHint: string;
  urgency: 'standard' | 'rush';
  lines: OrderLine[];
  toolCallId: string;
  /** Kept by the module in the checkpoint's meta (`model.call_started` / `run.checkpoint_saved`). */
  usage: OpenAI.CompletionUsage | null;
  requestId: string;
}

export interface Quote {
  totalCents: number;
  currency: 'EUR';
  lineItems: number;
}

/** The tool the model must call: the buyer's free text turned into order lines. */
const SUBMIT_PURCHASE_REQUEST: OpenAI.ChatCompletionTool = {
  type: 'function',
  function: {
    name: 'submit_purchase_request',
    description: 'Submit the purchase request extracted from the buyer message.',
    parameters: {
      type: 'object',
      required: ['buyer_id', 'supplier_hint', 'urgency', 'lines'],
      properties: {
        buyer_id: { type: 'string' },
        supplier_hint: { type: 'string' },
        urgency: { type: 'string', enum: ['standard', 'rush'] },
        lines: {
          type: 'array',
          items: {
            type: 'object',
            required: ['sku', 'qty'],
            properties: { sku: { type: 'string' }, qty: { type: 'integer' } },
          },
        },
      },
    },
  },
};

@Injectable()
export class PurchaseOrderAgent {
  constructor(
    private readonly openai: OpenAI,
    private readonly vendors: VendorApi,
    @Inject(SERVICE_SETTINGS) private readonly settings: ServiceSettings,
    private readonly tx: DurableTransactionHost,
  ) {}

  /** Step 1: the model reads the request (about 14,000 input tokens; never paid twice once committed). */
  @DurableStep({ name: 'parse_request', kind: 'model' })
  async parseRequest(order: PurchaseOrderInput): Promise<ParsedRequest> {
    const completion = await this.openai.chat.completions.create(
      {
        model: this.settings.model,
        messages: [
          { role: 'system', content: 'Extract the purchase request. Call submit_purchase_request once.' },
          { role: 'user', content: `Purchase order ${order.orderRef} via ${order.channel}:\n${order.text}` },
        ],
        tools: [SUBMIT_PURCHASE_REQUEST],
        tool_choice: { type: 'function', function: { name: 'submit_purchase_request' } },
      },
      { signal: currentRun()?.signal }, // aborted if this worker loses the run
    );
    const call = completion.choices[0]?.message.tool_calls?.[0];
    if (call?.type !== 'function')
      throw new Error(`no tool call in the model's answer for ${order.orderRef}`);
    const args = JSON.parse(call.function.arguments) as {
      buyer_id: string;
      supplier_hint: string;
      urgency: 'standard' | 'rush';
      lines: OrderLine[];
    };
    return {
      buyerId: args.buyer_id,
      supplierHint: args.supplier_hint,
      urgency: args.urgency,
      lines: args.lines,
      toolCallId: call.id,
      usage: completion.usage ?? null,
      requestId: completion.id,
    };
  }

  /** Step 2: a read, but a slow one: worth a checkpoint. */
  @DurableStep({ name: 'resolve_supplier', kind: 'tool' })
  resolveSupplier(orderRef: string, hint: string): Promise<{ supplierId: string; terms: string }> {
    const q = new URLSearchParams({ hint, orderRef });
    return this.vendors.call('GET', `/suppliers?${q}`, undefined, { signal: currentRun()?.signal });
  }

  /**
   * Step 3: 240 price lookups. The intra-step cursor (`ctx.progress`) records how far the loop got, so
   * a worker that takes over after a deploy re-prices at most one batch, not the whole quote.
   */
  @DurableStep({ name: 'build_quote', kind: 'tool' })
  async buildQuote(orderRef: string, supplierId: string, lines: OrderLine[]): Promise<Quote> {
    const ctx = currentRun(); // undefined when called outside a durable run (the naive baseline)
    const resume = ctx?.resumePoint<{ totalCents: number }>();
    let totalCents = resume?.partial.totalCents ?? 0;
    for (let from = resume ? resume.item + 1 : 0; from < lines.length; from += PRICE_BATCH) {
      const batch = lines.slice(from, from + PRICE_BATCH);
      const { prices } = await this.vendors.call<{ prices: number[] }>(
        'POST',
        '/catalog/prices',
        { orderRef, supplierId, from, skus: batch.map((l) => l.sku) },
        { signal: ctx?.signal },
      );
      totalCents += prices.reduce((sum, cents, i) => sum + cents * batch[i].qty, 0);
      await ctx?.progress(from + batch.length - 1, { totalCents });
    }
    return { totalCents, currency: 'EUR', lineItems: lines.length };
  }

  /**
   * Step 7: marks the buyer's account active in the app's own tables (accounts.ts): an activation row
   * and the account's counter, in ONE transaction on the module's database whose last statement is
   * this step's fenced checkpoint. The rows commit exactly once: a worker killed before the commit
   * leaves none (the next claim runs the body again), and a resumed run that finds the checkpoint gets
   * the recorded result without running the body.
   */
  @DurableTransaction({ name: 'activate_account' })
  activateAccount(orderRef: string, buyerId: string): Promise<Activation> {
    return writeActivation(this.tx.client, DURABLE_ACCOUNTS, orderRef, buyerId);
  }
}
