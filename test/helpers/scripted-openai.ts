/**
 * A loopback OpenAI-compatible chat-completions server with a scripted support agent, and the payment
 * vendor its tools call, on one real socket (the AI SDK's provider and the tools use global fetch, so
 * the fenced transport stands between them and the server as in an app).
 *
 * The model's script, by what the conversation holds:
 *   1. no tool results yet: two parallel tool calls, `lookup_order` and `refund_policy`;
 *   2. their results, no refund yet: a `refund` call for the amount the order lookup returned;
 *   3. the refund's result: the answer, naming the refund id the vendor returned.
 * Tool-call ids and response ids come from a counter of requests (a turn asked again gets new ids, as a
 * real model's would), so a committed turn requested again would show as a second refund. `reset()`
 * restarts the counter, for comparing two runs of the same script.
 *
 * The vendor: GET /orders/:id and GET /policy (reads, counted), POST /refunds (an effect, once per
 * Idempotency-Key: a key sent again gets the first answer), GET /refunds/:key (the lookup).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export type ModelMode = 'script' | 'fail-500' | 'fail-400';

/** What turns 1 and 2 say before their tool calls when the server narrates (`narrate`). */
export const NARRATION = {
  1: 'Let me look up order A-1 and the refund policy first. ',
  2: 'The order was delivered and is within the refund window, so I will refund 1250 cents now. ',
} as const;

export interface ScriptedServer {
  url: string;
  /** The OpenAI-compatible base URL (`${url}/v1`). */
  baseURL: string;
  mode: ModelMode;
  /**
   * Turns 1 and 2 also say a sentence (streamed word by word) before their tool calls (`NARRATION`):
   * a test of the run's progress stream sees every turn's deltas. Off by default.
   */
  narrate: boolean;
  /** Milliseconds between the chunks of a streamed answer (a slow model); 0 by default. */
  streamDelayMs: number;
  /** Model requests received (each HTTP request to /v1/chat/completions). */
  modelRequests: Array<{ stream: boolean; turn: number; at: number }>;
  /** Vendor calls: `lookup_order`, `refund_policy`, `refund` (sends, with repeats), `refund-lookup`. */
  vendorCalls: Array<{ what: string; key?: string; toolCallId?: string }>;
  /** Refunds applied, by idempotency key (an effect happens once per key). */
  refunds: Map<string, { refundId: string; toolCallId: string; amountCents: number }>;
  /**
   * Called once a refund's effect is applied, before its answer is sent (a crash test kills the worker
   * here); returning true sends no answer at all.
   */
  onRefundApplied?: () => boolean | void;
  reset(): void;
  close(): Promise<void>;
}

const BASE_CREATED = 1_780_000_000; // seconds: a fixed clock, so two runs of the script compare equal

export async function startScriptedServer(): Promise<ScriptedServer> {
  let count = 0;
  const s: ScriptedServer = {
    url: '',
    baseURL: '',
    mode: 'script',
    narrate: false,
    streamDelayMs: 0,
    modelRequests: [],
    vendorCalls: [],
    refunds: new Map(),
    reset() {
      count = 0;
      s.narrate = false;
      s.streamDelayMs = 0;
      s.modelRequests.length = 0;
      s.vendorCalls.length = 0;
      s.refunds.clear();
      s.mode = 'script';
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
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
        return json(res, 200, { orderId: order[1], amountCents: 1250, status: 'delivered' });
      }
      if (req.method === 'GET' && url.pathname === '/policy') {
        s.vendorCalls.push({ what: 'refund_policy', toolCallId: req.headers['x-tool-call-id'] as string });
        return json(res, 200, { refundableDays: 30 });
      }
      if (req.method === 'POST' && url.pathname === '/refunds') {
        const key = String(req.headers['idempotency-key'] ?? '');
        const body = JSON.parse(raw) as { orderId: string; amountCents: number; toolCallId: string };
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
        return refund
          ? json(res, 200, {
              found: true,
              result: { refundId: refund.refundId, amountCents: refund.amountCents },
            })
          : json(res, 200, { found: false });
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
    const toolResults = body.messages.filter((m) => m.role === 'tool');
    const names = new Map<string, string>();
    for (const m of body.messages) for (const c of m.tool_calls ?? []) names.set(c.id, c.function.name);
    const resultOf = (tool: string) => {
      const m = toolResults.find((t) => names.get(t.tool_call_id!) === tool);
      if (!m) return undefined;
      try {
        return JSON.parse(String(m.content)) as Record<string, unknown>;
      } catch {
        return { error: String(m.content) }; // a tool error, as the SDK hands it over: its message
      }
    };
    const turn = resultOf('refund') ? 3 : resultOf('lookup_order') ? 2 : 1;
    s.modelRequests.push({ stream: !!body.stream, turn, at: Date.now() });
    if (s.mode === 'fail-500')
      return json(res, 500, { error: { message: 'the model is overloaded', type: 'server_error' } });
    if (s.mode === 'fail-400')
      return json(res, 400, {
        error: { message: 'bad request: unknown parameter', type: 'invalid_request_error' },
      });

    let message: { content: string | null; reasoning_content?: string; tool_calls?: unknown[] };
    let finish: string;
    const call = (id: string, name: string, args: unknown) => ({
      id,
      type: 'function',
      function: { name, arguments: JSON.stringify(args) },
    });
    if (turn === 1) {
      message = {
        content: s.narrate ? NARRATION[1] : null,
        tool_calls: [
          call(`call_${n}_a`, 'lookup_order', { orderId: 'A-1' }),
          call(`call_${n}_b`, 'refund_policy', { topic: 'refunds' }),
        ],
      };
      finish = 'tool_calls';
    } else if (turn === 2 && resultOf('lookup_order')!.error !== undefined) {
      message = { content: `I could not look up the order: ${String(resultOf('lookup_order')!.error)}` };
      finish = 'stop';
    } else if (turn === 2) {
      const order = resultOf('lookup_order')!;
      message = {
        content: s.narrate ? NARRATION[2] : null,
        tool_calls: [
          call(`call_${n}_c`, 'refund', { orderId: order.orderId, amountCents: order.amountCents }),
        ],
      };
      finish = 'tool_calls';
    } else {
      const refund = resultOf('refund')!;
      message = {
        reasoning_content: 'The order is within the refund window.',
        content: `Refunded ${String(refund.amountCents)} cents for order A-1 (refund ${String(refund.refundId)}).`,
      };
      finish = 'stop';
    }
    const usage = {
      prompt_tokens: 100 * turn,
      completion_tokens: 10 * turn,
      total_tokens: 110 * turn,
      prompt_tokens_details: { cached_tokens: 5 },
    };
    const id = `chatcmpl_${n}`;
    const created = BASE_CREATED + n;
    if (!body.stream)
      return json(res, 200, {
        id,
        object: 'chat.completion',
        created,
        model: 'scripted-1',
        choices: [{ index: 0, message: { role: 'assistant', ...message }, finish_reason: finish }],
        usage,
      });

    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    const chunks: string[] = [];
    const chunk = (delta: unknown, finishReason: string | null = null, extra: object = {}) =>
      chunks.push(
        `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model: 'scripted-1', choices: [{ index: 0, delta, finish_reason: finishReason }], ...extra })}\n\n`,
      );
    chunk({ role: 'assistant' });
    if (message.reasoning_content) chunk({ reasoning_content: message.reasoning_content });
    for (const word of (message.content ?? '').split(/(?<= )/)) if (word) chunk({ content: word });
    (message.tool_calls ?? []).forEach((c, index) => chunk({ tool_calls: [{ index, ...(c as object) }] }));
    chunk({}, finish);
    chunks.push(
      `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model: 'scripted-1', choices: [], usage })}\n\n`,
    );
    chunks.push('data: [DONE]\n\n');
    const delay = s.streamDelayMs;
    if (!delay) return void res.end(chunks.join(''));
    // A slow model: one chunk at a time, until the client is gone (a killed worker's socket).
    const next = (): void => {
      if (res.destroyed) return;
      const c = chunks.shift()!;
      if (!chunks.length) return void res.end(c);
      res.write(c);
      setTimeout(next, delay);
    };
    next();
  }

  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  server.keepAliveTimeout = 60_000;
  s.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  s.baseURL = `${s.url}/v1`;
  return s;
}
