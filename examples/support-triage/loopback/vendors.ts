/**
 * The loopback services the agent's tools call, on one socket, and their ledgers:
 *
 * - the shop (read-only): `GET /shop/orders/:id`, `GET /shop/customers?email=`;
 * - the payment vendor: `POST /payments/refunds` applies a refund once per `Idempotency-Key` (a key
 *   sent again gets the first answer), `GET /payments/refunds/:key` says whether it applied one;
 * - the mail vendor: `POST /mail/messages` sends an email once per `Idempotency-Key`,
 *   `GET /mail/messages/:key` the same lookup.
 *
 * Every call is counted. Ids are a counter per vendor (`re_0001`, `msg_0001`): a second refund would
 * show as `re_0002`, in the ledger and in the agent's answer.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Refund {
  refundId: string;
  orderId: string;
  amountCents: number;
  toolCallId: string;
}
export interface Email {
  messageId: string;
  to: string;
  subject: string;
  toolCallId: string;
}

export interface Vendors {
  url: string;
  /** Calls received: `order`, `customer`, `refund` (every send), `refund-lookup`, `email`, `email-lookup`. */
  calls: Array<{ what: string; key?: string; toolCallId?: string }>;
  /** Refunds applied, by idempotency key. */
  refunds: Map<string, Refund>;
  /** Emails sent, by idempotency key. */
  emails: Map<string, Email>;
  /**
   * Called once a refund is applied, before its answer is sent: the crash demo SIGKILLs the worker
   * here. Returning true sends no answer (the caller is gone).
   */
  onRefundApplied?: (refund: Refund) => boolean | void;
  close(): Promise<void>;
}

const ORDERS: Record<string, { item: string; amountCents: number }> = {
  '1042': { item: 'Espresso grinder', amountCents: 4200 },
  '1043': { item: 'Milk jug', amountCents: 1900 },
};

export async function startVendors(): Promise<Vendors> {
  const v: Vendors = {
    url: '',
    calls: [],
    refunds: new Map(),
    emails: new Map(),
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
  const json = (res: http.ServerResponse, code: number, body: unknown) =>
    void res.writeHead(code, { 'content-type': 'application/json' }).end(JSON.stringify(body));

  const server = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (c) => (raw += c));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://loopback');
      const key = String(req.headers['idempotency-key'] ?? '');
      const toolCallId = req.headers['x-tool-call-id'] as string | undefined;
      const route = `${req.method} ${url.pathname}`;
      let m: RegExpExecArray | null;

      if ((m = /^GET \/shop\/orders\/(\w+)$/.exec(route))) {
        v.calls.push({ what: 'order', toolCallId });
        const order = ORDERS[m[1]];
        if (!order) return json(res, 404, { error: `no order #${m[1]}` });
        return json(res, 200, { orderId: m[1], ...order, status: 'delivered' });
      }
      if (route === 'GET /shop/customers') {
        v.calls.push({ what: 'customer', toolCallId });
        const email = url.searchParams.get('email') ?? '';
        return json(res, 200, { email, name: email.split('@')[0].replace(/^./, (c) => c.toUpperCase()) });
      }
      if (route === 'POST /payments/refunds' || route === 'POST /mail/messages') {
        const body = JSON.parse(raw || '{}');
        const refund = route === 'POST /payments/refunds';
        v.calls.push({ what: refund ? 'refund' : 'email', key, toolCallId: body.toolCallId });
        if (!key) return json(res, 400, { error: 'Idempotency-Key is required' });
        if (refund) {
          let r = v.refunds.get(key);
          if (!r) {
            const id = `re_${String(v.refunds.size + 1).padStart(4, '0')}`;
            r = {
              refundId: id,
              orderId: body.orderId,
              amountCents: body.amountCents,
              toolCallId: body.toolCallId,
            };
            v.refunds.set(key, r);
            if (v.onRefundApplied?.(r) === true) return; // applied; the answer never leaves
          }
          return json(res, 200, { refundId: r.refundId, amountCents: r.amountCents });
        }
        let e = v.emails.get(key);
        if (!e) {
          const id = `msg_${String(v.emails.size + 1).padStart(4, '0')}`;
          e = { messageId: id, to: body.to, subject: body.subject, toolCallId: body.toolCallId };
          v.emails.set(key, e);
        }
        return json(res, 200, { messageId: e.messageId });
      }
      if ((m = /^GET \/(payments\/refunds|mail\/messages)\/(.+)$/.exec(route))) {
        const refund = m[1] === 'payments/refunds';
        const k = decodeURIComponent(m[2]);
        v.calls.push({ what: refund ? 'refund-lookup' : 'email-lookup', key: k });
        const found = refund ? v.refunds.get(k) : v.emails.get(k);
        return json(res, 200, found ? { found: true, ...found } : { found: false });
      }
      json(res, 404, { error: 'not found' });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  server.keepAliveTimeout = 60_000;
  v.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return v;
}

/** How often each effect happened, for the demo's table and the test. */
export function ledger(v: Vendors) {
  const count = (what: string) => v.calls.filter((c) => c.what === what).length;
  const perToolCall = new Map<string, number>();
  for (const r of v.refunds.values()) perToolCall.set(r.toolCallId, (perToolCall.get(r.toolCallId) ?? 0) + 1);
  return {
    orderLookups: count('order'),
    customerLookups: count('customer'),
    refundsApplied: v.refunds.size,
    refundRequests: count('refund'),
    refundLookups: count('refund-lookup'),
    refundsPerToolCall: Object.fromEntries(perToolCall),
    emailsSent: v.emails.size,
    emailRequests: count('email'),
    emailLookups: count('email-lookup'),
  };
}
