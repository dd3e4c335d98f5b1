/**
 * A loopback stand-in for an OpenAI-compatible provider: `POST /v1/chat/completions` answers with one
 * `submit_purchase_request` tool call (the buyer's request parsed into 240 order lines) and a `usage`
 * block of about 14,000 prompt tokens, the chapter's figure for one parse. Nothing leaves the machine.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { LINE_ITEMS, PROMPT_TOKENS_PER_PARSE } from '../config';
import type { Ledger } from './ledger';

/** Deterministic 32-bit hash (FNV-1a): the same order always parses to the same request. */
export function hash(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

interface ChatRequest {
  model?: string;
  messages?: { role: string; content?: unknown }[];
}

let completions = 0;

/** Handles `POST /v1/chat/completions` after `delayMs`; returns false for any other route. */
export function handleModel(
  req: IncomingMessage,
  body: string,
  res: ServerResponse,
  ledger: Ledger,
  delayMs: () => number,
): boolean {
  if (req.method !== 'POST' || req.url !== '/v1/chat/completions') return false;
  if (!String(req.headers.authorization ?? '').startsWith('Bearer ')) {
    res.writeHead(401, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: { message: 'missing API key', type: 'invalid_request_error' } }));
    return true;
  }
  const chat = JSON.parse(body) as ChatRequest;
  const text = (chat.messages ?? []).map((m) => (typeof m.content === 'string' ? m.content : '')).join('\n');
  const ref = /\b(PO-[\w-]+)/.exec(text)?.[1] ?? 'unknown';
  const h = hash(ref);
  const lines = Array.from({ length: LINE_ITEMS }, (_, i) => ({
    sku: `SKU-${((h + i * 7919) % 90000) + 10000}`,
    qty: 1 + ((h >>> (i % 24)) % 12),
  }));
  const args = {
    buyer_id: `acct_${(h % 9000) + 1000}`,
    supplier_hint: ['Rotterdam Fasteners BV', 'Nordic Bearings AB', 'Lyon Hydraulics SA'][h % 3],
    urgency: h % 5 === 0 ? 'rush' : 'standard',
    lines,
  };
  const promptTokens = PROMPT_TOKENS_PER_PARSE - 400 + (h % 800);
  const completionTokens = 40 + LINE_ITEMS * 11;
  const n = ++completions;
  const o = ledger.order(ref);
  o.modelCalls++;
  o.promptTokens += promptTokens;
  o.completionTokens += completionTokens;
  setTimeout(() => {
    res.writeHead(200, { 'content-type': 'application/json', 'x-request-id': `req_${n}` });
    res.end(
      JSON.stringify({
        id: `chatcmpl-demo-${n}`,
        object: 'chat.completion',
        created: Math.floor(Date.now() / 1000),
        model: chat.model ?? 'demo-model',
        choices: [
          {
            index: 0,
            finish_reason: 'tool_calls',
            logprobs: null,
            message: {
              role: 'assistant',
              content: null,
              refusal: null,
              tool_calls: [
                {
                  id: `call_${h.toString(16)}`,
                  type: 'function',
                  function: { name: 'submit_purchase_request', arguments: JSON.stringify(args) },
                },
              ],
            },
          },
        ],
        usage: {
          prompt_tokens: promptTokens,
          completion_tokens: completionTokens,
          total_tokens: promptTokens + completionTokens,
        },
      }),
    );
  }, delayMs());
  return true;
}
