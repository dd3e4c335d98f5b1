/**
 * A loopback OpenAI-compatible Chat Completions server scripted as a two-agent support desk, and the
 * payment vendor its tools call, on one real socket (the OpenAI client and the tools use global fetch,
 * so the fenced transport stands between them and the server as in an app).
 *
 * The model's script, by what the conversation holds (the system message says which agent asks):
 *   1. triage, no tool results yet: two parallel tool calls, `lookup_order` and `refund`;
 *   2. triage, both results: the handoff, a call of `transfer_to_receipts_agent`;
 *   3. the receipts agent: the answer, naming the refund id the vendor returned.
 * Tool-call ids and response ids come from a counter of requests (a turn asked again gets new ids, as a
 * real model's would), so a committed turn requested again would show as a second refund.
 *
 * The vendor: GET /orders/:id (a read, counted), POST /refunds (an effect, once per Idempotency-Key: a
 * key sent again gets the first answer), GET /refunds/:key (the lookup).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export type AgentsModelMode = 'script' | 'fail-500' | 'fail-400';

export const TRIAGE_INSTRUCTIONS = 'You are the triage agent of a support desk.';
export const RECEIPTS_INSTRUCTIONS = 'You are the receipts agent: confirm what was done.';

export interface AgentsServer {
  url: string;
  /** The OpenAI-compatible base URL (`${url}/v1`). */
  baseURL: string;
  mode: AgentsModelMode;
  /** Model requests received (each HTTP request to /v1/chat/completions). */
  modelRequests: Array<{ turn: number; stream: boolean; agent: 'triage' | 'receipts' }>;
  /** Vendor calls: `lookup_order`, `refund` (sends, with repeats), `refund-lookup`. */
  vendorCalls: Array<{ what: string; key?: string; toolCallId?: string }>;
  /** Refunds applied, by idempotency key (an effect happens once per key). */
  refunds: Map<string, { refundId: string; toolCallId: string; amountCents: number }>;
  /** Called once a refund's effect is applied; returning true sends no answer (the crash test). */
  onRefundApplied?: () => boolean | void;
  /** Order lookups get no answer (a tool call held open). */
  hangOrders?: boolean;
  /** Called with each model request's turn once counted; returning true sends no answer (the crash test). */
  onModelRequest?: (turn: number) => boolean | void;
  reset(): void;
  close(): Promise<void>;
}

export async function startAgentsServer(): Promise<AgentsServer> {
  let count = 0;
  const s: AgentsServer = {
    url: '',
    baseURL: '',
    mode: 'script',
    modelRequests: [],
    vendorCalls: [],
    refunds: new Map(),
    reset() {
      count = 0;
      s.modelRequests.length = 0;
      s.vendorCalls.length = 0;
      s.refunds.clear();
      s.mode = 'script';
      s.onRefundApplied = undefined;
      s.onModelRequest = undefined;
      s.hangOrders = false;
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
  const json = (res: http.ServerResponse, code: number, body: unknown): void =>
    void res.writeHead(code, { 'content-type': 'application/json' }).end(JSON.stringify(body));

  const server = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (c) => (raw += c));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://x');
      if (req.method === 'POST' && url.pathname === '/v1/chat/completions') return chat(JSON.parse(raw), res);
      const order = /^\/orders\/([^/]+)$/.exec(url.pathname);
      if (req.method === 'GET' && order) {
        s.vendorCalls.push({ what: 'lookup_order', toolCallId: req.headers['x-tool-call-id'] as string });
        if (s.hangOrders) return;
        return json(res, 200, { orderId: order[1], amountCents: 1250, status: 'delivered' });
      }
      if (req.method === 'POST' && url.pathname === '/refunds') {
        const key = String(req.headers['idempotency-key'] ?? '');
        const body = JSON.parse(raw) as { amountCents: number; toolCallId: string };
        s.vendorCalls.push({ what: 'refund', key, toolCallId: body.toolCallId });
        let refund = s.refunds.get(key);
        if (!refund) {
          refund = {
            refundId: `rf_${s.refunds.size + 1}`,
            toolCallId: body.toolCallId,
            amountCents: body.amountCents,
          };
          s.refunds.set(key, refund);
          if (s.onRefundApplied?.() === true) return; // the caller is gone: no answer
        }
        return json(res, 200, { refundId: refund.refundId, amountCents: refund.amountCents });
      }
      const lookup = /^\/refunds\/(.+)$/.exec(url.pathname);
      if (req.method === 'GET' && lookup) {
        const key = decodeURIComponent(lookup[1]);
        s.vendorCalls.push({ what: 'refund-lookup', key });
        const refund = s.refunds.get(key);
        return json(
          res,
          200,
          refund
            ? { found: true, result: { refundId: refund.refundId, amountCents: refund.amountCents } }
            : { found: false },
        );
      }
      json(res, 404, { error: 'not found' });
    });
  });

  type Msg = {
    role: string;
    content?: unknown;
    tool_call_id?: string;
    tool_calls?: Array<{ id: string; function: { name: string } }>;
  };

  function chat(body: { messages: Msg[]; stream?: boolean }, res: http.ServerResponse): void {
    const n = ++count;
    const system = body.messages.find((m) => m.role === 'system')?.content;
    const agent = system === RECEIPTS_INSTRUCTIONS ? 'receipts' : 'triage';
    const names = new Map<string, string>();
    for (const m of body.messages) for (const c of m.tool_calls ?? []) names.set(c.id, c.function.name);
    const resultOf = (tool: string): Record<string, unknown> | undefined => {
      const m = body.messages.find((t) => t.role === 'tool' && names.get(t.tool_call_id!) === tool);
      if (!m) return undefined;
      try {
        return JSON.parse(String(m.content)) as Record<string, unknown>;
      } catch {
        return { error: String(m.content) };
      }
    };
    const turn = agent === 'receipts' ? 3 : resultOf('refund') ? 2 : 1;
    s.modelRequests.push({ turn, stream: !!body.stream, agent });
    if (s.onModelRequest?.(turn) === true) return; // the caller is gone: no answer
    if (s.mode === 'fail-500')
      return json(res, 500, { error: { message: 'the model is overloaded', type: 'server_error' } });
    if (s.mode === 'fail-400')
      return json(res, 400, {
        error: { message: 'bad request: unknown parameter', type: 'invalid_request_error' },
      });

    const call = (id: string, name: string, args: unknown) => ({
      id,
      type: 'function',
      function: { name, arguments: JSON.stringify(args) },
    });
    let message: { content: string | null; tool_calls?: unknown[] };
    if (turn === 1)
      message = {
        content: null,
        tool_calls: [
          call(`call_${n}_a`, 'lookup_order', { orderId: 'A-1' }),
          call(`call_${n}_b`, 'refund', { orderId: 'A-1', amountCents: 1250 }),
        ],
      };
    else if (turn === 2)
      message = { content: null, tool_calls: [call(`call_${n}_h`, 'transfer_to_receipts_agent', {})] };
    else {
      const refund = resultOf('refund') ?? {};
      const order = resultOf('lookup_order') ?? {};
      message = {
        content: `Refunded ${String(refund.amountCents)} cents for order A-1 (refund ${String(refund.refundId)}); the order was ${String(order.status)}.`,
      };
    }
    const finish = message.tool_calls ? 'tool_calls' : 'stop';
    const usage = { prompt_tokens: 100 * turn, completion_tokens: 10 * turn, total_tokens: 110 * turn };
    const id = `chatcmpl_${n}`;
    const created = 1_780_000_000 + n;
    if (!body.stream)
      return json(res, 200, {
        id,
        object: 'chat.completion',
        created,
        model: 'scripted-agents-1',
        choices: [{ index: 0, message: { role: 'assistant', ...message }, finish_reason: finish }],
        usage,
      });
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    const chunk = (delta: unknown, finishReason: string | null = null, extra: object = {}) =>
      res.write(
        `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model: 'scripted-agents-1', choices: [{ index: 0, delta, finish_reason: finishReason }], ...extra })}\n\n`,
      );
    chunk({ role: 'assistant' });
    for (const word of (message.content ?? '').split(/(?<= )/)) if (word) chunk({ content: word });
    (message.tool_calls ?? []).forEach((c, index) => chunk({ tool_calls: [{ index, ...(c as object) }] }));
    chunk({}, finish);
    res.write(
      `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model: 'scripted-agents-1', choices: [], usage })}\n\n`,
    );
    res.end('data: [DONE]\n\n');
  }

  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  server.keepAliveTimeout = 60_000;
  s.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  s.baseURL = `${s.url}/v1`;
  return s;
}
