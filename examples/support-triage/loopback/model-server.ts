/**
 * A loopback OpenAI-compatible chat-completions endpoint that plays the support-triage model. Every
 * answer is a function of the request's content only (never of how many requests came before), so a
 * turn sent again after a crash gets the answer the first one got:
 *
 *   1. no tool results yet: two parallel tool calls, `lookup_order` and `lookup_customer`;
 *   2. the order and the customer: `refund_payment` for the order's amount;
 *   3. the refund's receipt: `email_customer` with the refund id;
 *   4. the email's receipt: the final answer.
 *
 * Tool-call ids and the response id are a hash of the conversation so far. It counts the requests it
 * got, by turn: a committed turn asked again would show as a second request for that turn.
 */
import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ModelServer {
  /** The OpenAI-compatible base URL (`http://127.0.0.1:<port>/v1`). */
  baseURL: string;
  /** Every request to /v1/chat/completions, by the turn the conversation was at. */
  requests: Array<{ turn: number; at: number }>;
  close(): Promise<void>;
}

type Message = {
  role: string;
  content?: unknown;
  tool_call_id?: string;
  tool_calls?: Array<{ id: string; function: { name: string; arguments: string } }>;
};

const CREATED = 1_780_000_000; // a fixed clock: two runs of the script compare equal
const hash = (v: unknown) => createHash('sha256').update(JSON.stringify(v)).digest('hex').slice(0, 12);
const money = (cents: number) => `€${(cents / 100).toFixed(2)}`;

/** The tool results in a conversation, by tool name (a tool's error arrives as its message). */
function toolResults(messages: Message[]): Map<string, any> {
  const names = new Map<string, string>();
  for (const m of messages) for (const c of m.tool_calls ?? []) names.set(c.id, c.function.name);
  const out = new Map<string, any>();
  for (const m of messages.filter((x) => x.role === 'tool')) {
    let value: unknown;
    try {
      value = JSON.parse(String(m.content));
    } catch {
      value = { error: String(m.content) };
    }
    out.set(names.get(m.tool_call_id ?? '') ?? '?', value);
  }
  return out;
}

/** The assistant's next message for this conversation, and the turn it is. */
export function nextTurn(messages: Message[]): {
  turn: number;
  content: string | null;
  calls: Array<{ name: string; args: object }>;
} {
  const results = toolResults(messages);
  const ticket = String(messages.find((m) => m.role === 'user')?.content ?? '');
  const orderId = /#(\d+)/.exec(ticket)?.[1] ?? 'unknown';
  const email = /[\w.+-]+@[\w.-]+/.exec(ticket)?.[0] ?? 'unknown';
  const failed = [...results].find(([, v]) => v && typeof v === 'object' && 'error' in v);
  const turn = results.has('email_customer') ? 4 : results.has('refund_payment') ? 3 : results.size ? 2 : 1;
  if (failed)
    return { turn, content: `I could not finish: ${failed[0]} failed (${failed[1].error}).`, calls: [] };
  const order = results.get('lookup_order');
  const customer = results.get('lookup_customer');
  const refund = results.get('refund_payment');
  if (turn === 1)
    return {
      turn,
      content: null,
      calls: [
        { name: 'lookup_order', args: { orderId } },
        { name: 'lookup_customer', args: { email } },
      ],
    };
  if (turn === 2)
    return {
      turn,
      content: null,
      calls: [
        {
          name: 'refund_payment',
          args: { orderId: order.orderId, amountCents: order.amountCents, reason: 'arrived damaged' },
        },
      ],
    };
  if (turn === 3)
    return {
      turn,
      content: null,
      calls: [
        {
          name: 'email_customer',
          args: {
            to: customer.email,
            subject: `Your refund for order #${order.orderId}`,
            body: `Hello ${customer.name}, we refunded ${money(refund.amountCents)} (refund ${refund.refundId}).`,
          },
        },
      ],
    };
  const mail = results.get('email_customer');
  return {
    turn,
    content:
      `Refunded ${money(refund.amountCents)} for order #${order.orderId} (refund ${refund.refundId}) ` +
      `and emailed ${customer.email} (message ${mail.messageId}).`,
    calls: [],
  };
}

export async function startModelServer(): Promise<ModelServer> {
  const requests: ModelServer['requests'] = [];
  const server = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (c) => (raw += c));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
        res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not found"}');
        return;
      }
      const body = JSON.parse(raw) as { messages: Message[] };
      const next = nextTurn(body.messages);
      requests.push({ turn: next.turn, at: Date.now() });
      const id = hash(body.messages);
      const message = {
        role: 'assistant',
        content: next.content,
        ...(next.calls.length
          ? {
              tool_calls: next.calls.map((c, i) => ({
                id: `call_${id}_${i}`,
                type: 'function',
                function: { name: c.name, arguments: JSON.stringify(c.args) },
              })),
            }
          : {}),
      };
      res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          id: `chatcmpl_${id}`,
          object: 'chat.completion',
          created: CREATED + next.turn,
          model: 'triage-1',
          choices: [{ index: 0, message, finish_reason: next.calls.length ? 'tool_calls' : 'stop' }],
          usage: {
            prompt_tokens: 400 * next.turn,
            completion_tokens: 40,
            total_tokens: 400 * next.turn + 40,
          },
        }),
      );
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  server.keepAliveTimeout = 60_000;
  return {
    baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    requests,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
