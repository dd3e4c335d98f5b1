import type { LanguageModel } from 'ai';
import { currentRun } from '../index';
import type { RetryPolicy, RunContext } from '../index';
import { fromAiJson, toAiJson } from './ai-values';
import { checkRunning, stepCaller } from '../agent-shared/calls';
import { DeltaEmitter } from './delta-emitter';

/** The attempts a model call gets in all when `durableModel`'s `retry` names none. */
const DEFAULT_MODEL_ATTEMPTS = 3;

/** A language model of the AI SDK's provider specification v3 (what `ai` 6's providers return). */
export type AiLanguageModel = Extract<LanguageModel, { specificationVersion: 'v3' }>;
type CallOptions = Parameters<AiLanguageModel['doGenerate']>[0];
type GenerateResult = Awaited<ReturnType<AiLanguageModel['doGenerate']>>;
type StreamResult = Awaited<ReturnType<AiLanguageModel['doStream']>>;
type StreamPart = StreamResult['stream'] extends ReadableStream<infer P> ? P : never;

/** Options of `durableModel`. */
export interface DurableModelOptions {
  /** The name of its model steps (default `model:<modelId>`): recorded with each checkpoint. */
  name?: string;
  /** The model budget (a name in the module's `budgets`) each call is admitted on and charged to. */
  budget?: string;
  /**
   * The one retry policy of a call (merged over the module's `defaultRetry`): a request that failed
   * with an error the provider marks retryable is sent again up to `maxAttempts` (default 3) in all,
   * counted across claims (a worker that dies between two attempts leaves the next claim only what is
   * left); one it marks not retryable (`isRetryable: false`: a 400, a 401) is never sent again. The AI
   * SDK's own retries never run on top (the errors it sees are not its `APICallError`s).
   */
  retry?: RetryPolicy;
  /** Abort a request (and retry it) when it runs longer than this. */
  timeoutMs?: number;
  /**
   * `streamText` (a `doStream` call): the topic under which the deltas of the model's text and
   * reasoning are appended to the run's progress stream as they arrive (`ctx.emit` from the step's
   * body: an attempt cut off and run again is marked superseded). `false`: not streamed. Default
   * `'ai.delta'`.
   */
  streamTopic?: string | false;
  /**
   * Keep the provider's request body (`request.body`, the whole prompt as sent) in the recorded result.
   * Default false: each turn's prompt is already the previous turns' recorded results, and storing it
   * again with every turn would grow the record with the square of the conversation.
   */
  recordRequestBody?: boolean;
}

/** What a model step records: the usage and request id the engine keeps in the checkpoint's meta, and the result. */
interface RecordedCall {
  requestId: string | null;
  usage: { inputTokens?: number; outputTokens?: number; totalTokens?: number } | null;
  result: unknown;
}

/**
 * The AI SDK's model made durable inside a run: pass it to `generateText` / `streamText` in place of
 * the model. Each `doGenerate` / `doStream` call the SDK makes is a model step: executed once, its
 * result (content, usage, finish reason, response id and timestamp, provider metadata, warnings)
 * recorded, and on a replay after a crash or a park returned from the record without a request. The
 * request carries the run's abort signal (a lost lease aborts it) and goes out under the fenced
 * transport. Outside a run it is the model itself.
 * @example
 * ```ts
 * const result = await generateText({ model: durableModel(ctx, openai('gpt-4.1')), tools: durableTools(ctx, tools, { commands: { refund: { inDoubt: 'lookup', lookup } } }), stopWhen: stepCountIs(8), maxRetries: 0, messages });
 * ```
 */
export function durableModel(
  ctx: RunContext,
  model: AiLanguageModel,
  options: DurableModelOptions = {},
): AiLanguageModel {
  if (!model || typeof model !== 'object' || model.specificationVersion !== 'v3')
    throw new TypeError(
      'durableModel takes a language model object of the AI SDK provider specification v3 (ai 6: e.g. createOpenAICompatible(...)(modelId))',
    );
  const maxAttempts = options.retry?.maxAttempts ?? DEFAULT_MODEL_ATTEMPTS;
  const step = stepCaller(
    {
      name: options.name ?? `model:${model.modelId}`,
      kind: 'model',
      budget: options.budget,
      retry: { ...options.retry, maxAttempts },
      timeoutMs: options.timeoutMs,
    },
    'AiStep',
  );
  const topic = options.streamTopic === undefined ? 'ai.delta' : options.streamTopic;
  const keepBody = options.recordRequestBody === true;

  const call = async (kind: 'generate' | 'stream', opts: CallOptions, body: () => Promise<RecordedCall>) => {
    checkRunning(ctx);
    // The fingerprint: the call as the SDK made it (prompt, tools, settings); a replay that asks for
    // another call at this position is non-determinism, not an old answer to a new question.
    const args = {
      kind,
      provider: model.provider,
      modelId: model.modelId,
      call: toAiJson({ ...opts, abortSignal: undefined }),
    };
    let recorded: RecordedCall;
    try {
      // The step's policy counts the failed attempts across claims (the engine records each one).
      recorded = (await step(args, body)) as RecordedCall;
    } catch (err) {
      // The step's retries were the only ones: its failure (recorded, rebuilt the same on a replay) is
      // final for the run too, so no later claim sends the request again. An engine stop stays as it is.
      if (!ctx.signal.aborted && err && typeof err === 'object') Object.assign(err, { retryable: false });
      throw err;
    }
    return fromAiJson<Record<string, unknown>>(recorded.result);
  };

  return {
    specificationVersion: 'v3',
    provider: model.provider,
    modelId: model.modelId,
    get supportedUrls() {
      return model.supportedUrls;
    },
    async doGenerate(opts: CallOptions): Promise<GenerateResult> {
      const result = await call('generate', opts, async () => {
        const r = await send(() => model.doGenerate({ ...opts, abortSignal: linked(opts.abortSignal, ctx) }));
        const out: Record<string, unknown> = { ...r, content: await withToolCallIds(r.content) };
        if (!keepBody && r.request) out.request = { ...r.request, body: undefined };
        return {
          requestId: typeof r.response?.id === 'string' ? r.response.id : null,
          usage: flatUsage(r.usage),
          result: toAiJson(out),
        };
      });
      return result as unknown as GenerateResult;
    },
    async doStream(opts: CallOptions): Promise<StreamResult> {
      const result = await call('stream', opts, async () => {
        const r = await send(() => model.doStream({ ...opts, abortSignal: linked(opts.abortSignal, ctx) }));
        const deltas = topic ? new DeltaEmitter(ctx, topic) : null;
        const parts: StreamPart[] = [];
        const reader = r.stream.getReader();
        try {
          for (;;) {
            const { done, value } = await reader.read();
            if (done) break;
            if (value.type === 'error') throw retryableOrNot(value.error);
            if (value.type === 'tool-call' && !value.toolCallId) value.toolCallId = runUuid(ctx);
            parts.push(value);
            if (value.type === 'text-delta') deltas?.push('text', value.delta);
            else if (value.type === 'reasoning-delta') deltas?.push('reasoning', value.delta);
          }
        } finally {
          reader.releaseLock();
        }
        await deltas?.flush();
        const meta = parts.find((p) => p.type === 'response-metadata') as { id?: unknown } | undefined;
        const finish = parts.find((p) => p.type === 'finish') as { usage?: unknown } | undefined;
        const request = r.request && !keepBody ? { ...r.request, body: undefined } : r.request;
        return {
          requestId: typeof meta?.id === 'string' ? meta.id : null,
          usage: flatUsage(finish?.usage),
          result: toAiJson({ parts, request, response: r.response }),
        };
      });
      const parts = (result.parts ?? []) as StreamPart[];
      const stream = new ReadableStream<StreamPart>({
        start(controller) {
          for (const p of parts) controller.enqueue(p);
          controller.close();
        },
      });
      return { stream, request: result.request, response: result.response } as StreamResult;
    },
  };
}

/**
 * One request. An error the provider marks not retryable (`isRetryable: false`, the AI SDK's
 * APICallError for a 400, 401, 404…) fails the step at once: one request, never sent again.
 */
async function send<T>(request: () => PromiseLike<T>): Promise<T> {
  try {
    return await request();
  } catch (err) {
    throw retryableOrNot(err);
  }
}

function retryableOrNot(err: unknown): unknown {
  if (err && typeof err === 'object' && (err as { isRetryable?: unknown }).isRetryable === false)
    Object.assign(err, { retryable: false });
  return err;
}

/** The SDK's abort signal and the run's (fires when this worker loses the run, or it is cancelled). */
function linked(signal: AbortSignal | undefined, ctx: RunContext): AbortSignal {
  const run = currentRun()?.signal ?? ctx.signal;
  return signal ? AbortSignal.any([signal, run]) : run;
}

/** A UUID drawn inside the step: derived from the run, the step and the call, the same on a retry. */
function runUuid(ctx: RunContext): string {
  return (currentRun() ?? ctx).uuid();
}

async function withToolCallIds(content: GenerateResult['content']): Promise<GenerateResult['content']> {
  return content.map((c) => {
    if (c.type !== 'tool-call' || c.toolCallId) return c;
    const ctx = currentRun();
    return ctx ? { ...c, toolCallId: ctx.uuid() } : c;
  });
}

/** Token counts of a v3 usage (`{ inputTokens: { total } }`) or a flat one, as the engine reads them. */
function flatUsage(usage: unknown): RecordedCall['usage'] {
  if (!usage || typeof usage !== 'object') return null;
  const u = usage as Record<string, unknown>;
  const count = (x: unknown): number | undefined => {
    if (typeof x === 'number' && Number.isFinite(x)) return x;
    const t = x && typeof x === 'object' ? (x as { total?: unknown }).total : undefined;
    return typeof t === 'number' && Number.isFinite(t) ? t : undefined;
  };
  const inputTokens = count(u.inputTokens);
  const outputTokens = count(u.outputTokens);
  if (inputTokens === undefined && outputTokens === undefined) return null;
  return { inputTokens, outputTokens, totalTokens: (inputTokens ?? 0) + (outputTokens ?? 0) };
}
