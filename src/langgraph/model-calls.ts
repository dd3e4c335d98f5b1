import { createHash } from 'node:crypto';
import type { BaseMessage } from '@langchain/core/messages';
import type { ChatResult } from '@langchain/core/outputs';
import { AsyncLocalStorageProviderSingleton } from '@langchain/core/singletons';
import type { GraphFrame, ModelEntry, ModelUsage, StoredModelError } from './graph-frame';

/**
 * The key of a model call in the graph's journal: the LangGraph task that makes it (its checkpoint
 * namespace: node and task id, the same when the task runs again from the same checkpoint), a hash of
 * what it asks (each message's type, content, tool calls, tool call id and name; the bound tools'
 * names), and its count among the calls of that task asking the same in this `graph.invoke`. A node
 * run again asks the same in the same order and gets the same keys; two calls of a node racing each
 * other keep theirs whatever the order they reach the model.
 */
export function modelKey(frame: GraphFrame, messages: BaseMessage[], options: { tools?: unknown }): string {
  const config = AsyncLocalStorageProviderSingleton.getRunnableConfig() as
    { configurable?: { checkpoint_ns?: unknown } } | undefined;
  const task = String(config?.configurable?.checkpoint_ns ?? '');
  const prompt = messages.map((m) => {
    const x = m as BaseMessage & { tool_calls?: Array<{ id?: string; name: string; args: unknown }> };
    const calls = x.tool_calls?.map((c) => [c.id ?? null, c.name, c.args]) ?? null;
    return [
      m.getType(),
      m.content,
      calls,
      (m as { tool_call_id?: string }).tool_call_id ?? null,
      m.name ?? null,
    ];
  });
  const tools = Array.isArray(options.tools) ? options.tools.map(toolName) : null;
  const hash = createHash('sha256')
    .update(JSON.stringify([prompt, tools]))
    .digest('hex')
    .slice(0, 16);
  const base = `${task}|${hash}`;
  const n = (frame.modelCalls.get(base) ?? 0) + 1;
  frame.modelCalls.set(base, n);
  return `${base}#${n}`;
}

function toolName(tool: unknown): string | null {
  const t = tool as { name?: unknown; function?: { name?: unknown } } | null;
  const name = t?.function?.name ?? t?.name;
  return typeof name === 'string' ? name : null;
}

/** The journal entry of an answer: the result as the saver's serializer writes it, and its usage. */
export async function modelEntry(
  frame: GraphFrame,
  name: string,
  key: string,
  result: ChatResult,
): Promise<ModelEntry> {
  const [type, bytes] = await frame.recorder.serde.dumpsTyped(result);
  const answer: ModelEntry['answer'] =
    type === 'json'
      ? { type, data: Buffer.from(bytes).toString('utf8') }
      : { type, data: Buffer.from(bytes).toString('base64'), base64: true };
  return { kind: 'model', name, key, usage: usageOf(result), answer };
}

/** The answer of a journal entry, as the saver's serializer reads it back. */
export async function answerOf(
  frame: GraphFrame,
  { type, data, base64 }: NonNullable<ModelEntry['answer']>,
): Promise<ChatResult> {
  const stored = base64 ? new Uint8Array(Buffer.from(data, 'base64')) : data;
  return (await frame.recorder.serde.loadsTyped(type, stored)) as ChatResult;
}

/** Token counts of an answer: its message's `usage_metadata`, else the provider's `tokenUsage`. */
export function usageOf(result: ChatResult): ModelUsage | null {
  const count = (x: unknown) => (typeof x === 'number' && Number.isFinite(x) ? x : undefined);
  for (const g of result.generations ?? []) {
    const u = (g.message as { usage_metadata?: Record<string, unknown> } | undefined)?.usage_metadata;
    if (u)
      return {
        inputTokens: count(u.input_tokens),
        outputTokens: count(u.output_tokens),
        totalTokens: count(u.total_tokens),
      };
  }
  const t = (result.llmOutput as { tokenUsage?: Record<string, unknown> } | undefined)?.tokenUsage;
  if (!t) return null;
  return {
    inputTokens: count(t.promptTokens),
    outputTokens: count(t.completionTokens),
    totalTokens: count(t.totalTokens),
  };
}

/** Fields of an error a record keeps: primitives, never a request, a response or a credential. */
const DROPPED =
  /authorization|headers|config|request|response|cookie|password|secret|token|api_?key|credential|url|uri/i;

/** An error as the journal keeps it (at most 16 fields, strings cut to 1,000 characters). */
export function storedError(err: unknown): StoredModelError {
  const e = (err && typeof err === 'object' ? err : { message: String(err) }) as Record<string, unknown>;
  const fields: StoredModelError['fields'] = {};
  for (const [k, v] of Object.entries(e).slice(0, 64)) {
    if (
      Object.keys(fields).length >= 16 ||
      k === 'message' ||
      k === 'stack' ||
      k === 'name' ||
      DROPPED.test(k)
    )
      continue;
    if (typeof v === 'string') fields[k] = v.slice(0, 1000);
    else if (typeof v === 'boolean' || v === null || (typeof v === 'number' && Number.isFinite(v)))
      fields[k] = v;
  }
  const name = typeof e.name === 'string' ? e.name : 'Error';
  return { name, message: String(e.message ?? err).slice(0, 1000), fields: { ...fields, retryable: false } };
}

/** The error a recorded failure throws (the first time as on every replay): name, message, fields. */
export function rebuiltError(stored: StoredModelError): Error {
  const err = new Error(stored.message);
  Object.defineProperty(err, 'name', { value: stored.name, writable: true, configurable: true });
  return Object.assign(err, stored.fields);
}
