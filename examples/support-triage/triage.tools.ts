/**
 * The agent's tools, written for the Vercel AI SDK as a team would write them, and the lookups that
 * settle a call whose outcome a crash hid. Nothing here knows about durability except the one line per
 * command tool that sends the command's idempotency key (`toolCommandContext(options)`; outside a run,
 * the toolCallId).
 */
import { Inject, Injectable } from '@nestjs/common';
import { jsonSchema, tool, type ToolExecutionOptions } from 'ai';
import type { LookupResult } from '../../src'; // in an app: 'nestjs-durable-execution'
import { toolCommandContext } from '../../src/ai-sdk'; // in an app: 'nestjs-durable-execution/ai-sdk'

/** Where the model and the vendors listen (loopback servers in the demo). */
export interface TriageSettings {
  /** OpenAI-compatible base URL, e.g. `http://127.0.0.1:4000/v1`. */
  modelBaseURL: string;
  /** The shop, payment and mail vendors (loopback/vendors.ts). */
  vendorsUrl: string;
}
export const TRIAGE_SETTINGS = Symbol('TRIAGE_SETTINGS');

const schema = <T>(properties: Record<string, { type: 'string' | 'number' }>) =>
  jsonSchema<T>({
    type: 'object',
    properties,
    required: Object.keys(properties),
    additionalProperties: false,
  });

@Injectable()
export class TriageTools {
  constructor(@Inject(TRIAGE_SETTINGS) private readonly settings: TriageSettings) {}

  private async call<T>(path: string, init: RequestInit, options: ToolExecutionOptions): Promise<T> {
    const headers = {
      'content-type': 'application/json',
      'x-tool-call-id': options.toolCallId,
      ...init.headers,
    };
    const res = await fetch(`${this.settings.vendorsUrl}${path}`, {
      ...init,
      headers,
      signal: options.abortSignal,
    });
    const body = (await res.json()) as T & { error?: string };
    if (!res.ok) throw new Error(body.error ?? `${path}: HTTP ${res.status}`);
    return body;
  }

  /** The key the vendor deduplicates on: the command's inside a run. */
  private key(options: ToolExecutionOptions): string {
    return toolCommandContext(options)?.idempotencyKey ?? options.toolCallId;
  }

  tools() {
    return {
      lookup_order: tool({
        description: 'Looks up an order in the shop',
        inputSchema: schema<{ orderId: string }>({ orderId: { type: 'string' } }),
        execute: ({ orderId }, o) =>
          this.call<{ orderId: string; item: string; amountCents: number; status: string }>(
            `/shop/orders/${encodeURIComponent(orderId)}`,
            {},
            o,
          ),
      }),
      lookup_customer: tool({
        description: 'Looks up a customer by email address',
        inputSchema: schema<{ email: string }>({ email: { type: 'string' } }),
        execute: ({ email }, o) =>
          this.call<{ email: string; name: string }>(
            `/shop/customers?email=${encodeURIComponent(email)}`,
            {},
            o,
          ),
      }),
      refund_payment: tool({
        description: 'Refunds an order through the payment vendor',
        inputSchema: schema<{ orderId: string; amountCents: number; reason: string }>({
          orderId: { type: 'string' },
          amountCents: { type: 'number' },
          reason: { type: 'string' },
        }),
        execute: async (input, o) => {
          const body = JSON.stringify({ ...input, toolCallId: o.toolCallId });
          const headers = { 'idempotency-key': this.key(o) };
          const r = await this.call<{ refundId: string; amountCents: number }>(
            '/payments/refunds',
            { method: 'POST', headers, body },
            o,
          );
          return { refundId: r.refundId, amountCents: r.amountCents };
        },
      }),
      email_customer: tool({
        description: 'Emails the customer',
        inputSchema: schema<{ to: string; subject: string; body: string }>({
          to: { type: 'string' },
          subject: { type: 'string' },
          body: { type: 'string' },
        }),
        execute: async (input, o) => {
          const body = JSON.stringify({ ...input, toolCallId: o.toolCallId });
          const headers = { 'idempotency-key': this.key(o) };
          const r = await this.call<{ messageId: string }>(
            '/mail/messages',
            { method: 'POST', headers, body },
            o,
          );
          return { messageId: r.messageId };
        },
      }),
    };
  }

  /** Did the payment vendor apply a refund with this key? With the answer the refund call would have had. */
  async lookupRefund(key: string): Promise<LookupResult> {
    const res = await fetch(`${this.settings.vendorsUrl}/payments/refunds/${encodeURIComponent(key)}`);
    const r = (await res.json()) as { found: boolean; refundId?: string; amountCents?: number };
    return r.found
      ? { found: true, result: { refundId: r.refundId, amountCents: r.amountCents } }
      : { found: false };
  }
}
