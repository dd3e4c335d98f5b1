import type {
  Model,
  ModelProvider,
  ModelRequest,
  ModelResponse,
  ModelRetryAdvice,
  StreamEvent,
} from '@openai/agents';
import type { RetryPolicy, RunContext } from '../index';
import { checkRunning, stepCaller } from '../agent-shared/calls';
import { linkedSignal } from './calls';
import { DeltaEmitter } from './delta-emitter';
import { fromJsonValue, toJsonValue } from './values';

/** Options of `durableModel` and `durableModelProvider`. */
export interface DurableAgentModelOptions {
  /** The name of its model steps (default `model:<model name>`, or `model` when it has none). */
  name?: string;
  /** The model budget (a name in the module's `budgets`) each call is admitted on and charged to. */
  budget?: string;
  /**
   * The one retry policy of a call (merged over the module's `defaultRetry`): a request that failed
   * with a retryable error (a 5xx, 408, 409, 429, a lost connection) is sent again up to `maxAttempts`
   * in all, counted across claims (a worker that dies between two attempts leaves the next claim only
   * those left); a 400, 401, 403, 404 or 422 is never sent again. The OpenAI client's own retries are
   * turned off for each request, and the runner's (`modelSettings.retry`) are vetoed.
   */
  retry?: RetryPolicy;
  /** Abort a request (and retry it) when it runs longer than this. */
  timeoutMs?: number;
  /**
   * Streamed runs (`getStreamedResponse`): the topic under which the text deltas are appended to the
   * run's progress stream as they arrive (`{ kind: 'text', text }`). `false`: not streamed. Default
   * `'agents.delta'`.
   */
  streamTopic?: string | false;
}

/** What a model step records: the usage and request id the engine keeps in the checkpoint's meta, and the result. */
interface RecordedCall {
  requestId: string | null;
  usage: { inputTokens: number; outputTokens: number; totalTokens: number } | null;
  result: unknown;
}

/**
 * A model of the OpenAI Agents SDK made durable inside a run: every `getResponse` /
 * `getStreamedResponse` the runner makes is a model step (`@DurableStep({ kind: 'model' })`), executed
 * once, its response (output items with their call ids, usage, response id, provider data) recorded,
 * and on a replay after a crash or a park returned from the record without a request. Handoffs and
 * tool calls are model output: a replayed turn hands the runner the same ones. Outside a run it is the
 * model itself.
 */
export function durableModel(
  ctx: RunContext,
  model: Model,
  options: DurableAgentModelOptions & { modelName?: string } = {},
): Model {
  if (!ctx || typeof ctx.uuid !== 'function')
    throw new TypeError("durableModel takes the run's context first: durableModel(ctx, model, options)");
  if (!model || typeof model.getResponse !== 'function')
    throw new TypeError(
      'durableModel takes a Model of the OpenAI Agents SDK (getResponse, getStreamedResponse)',
    );
  const modelName = options.modelName ?? null;
  const step = stepCaller(
    {
      name: options.name ?? (modelName ? `model:${modelName}` : 'model'),
      kind: 'model',
      budget: options.budget,
      retry: options.retry,
      timeoutMs: options.timeoutMs,
    },
    'AgentsStep',
  );
  const topic = options.streamTopic === undefined ? 'agents.delta' : options.streamTopic;

  const call = async (
    kind: 'response' | 'stream',
    request: ModelRequest,
    body: () => Promise<RecordedCall>,
  ) => {
    checkRunning(ctx);
    // The fingerprint: the request as the runner built it (instructions, input items, tools, handoffs,
    // settings); a replay that asks another question at this position is non-determinism.
    const args = { kind, model: modelName, request: toJsonValue(requestFingerprint(request)) };
    try {
      return (await step(args, body)) as RecordedCall;
    } catch (err) {
      // The step's retries were the only ones: its failure (recorded, rebuilt the same on a replay) is
      // final for the run too, so no later claim sends the request again. An engine stop stays as it is.
      if (!ctx.signal.aborted && err && typeof err === 'object') Object.assign(err, { retryable: false });
      throw err;
    }
  };

  const durable: Model = {
    async getResponse(request: ModelRequest): Promise<ModelResponse> {
      const recorded = await call('response', request, async () => {
        const r = await send(() => model.getResponse(innerRequest(request, ctx)));
        const requestId = r.requestId ?? r.responseId;
        return {
          requestId: typeof requestId === 'string' ? requestId : null,
          usage: flatUsage(r.usage),
          result: toJsonValue(r),
        };
      });
      const r = fromJsonValue<ModelResponse>(recorded.result);
      return { ...r, usage: await usageOf(r.usage) };
    },
    async *getStreamedResponse(request: ModelRequest): AsyncIterable<StreamEvent> {
      const recorded = await call('stream', request, async () => {
        const deltas = topic ? new DeltaEmitter(ctx, topic) : null;
        const events: StreamEvent[] = [];
        try {
          for await (const e of model.getStreamedResponse(innerRequest(request, ctx))) {
            events.push(e);
            if (e.type === 'output_text_delta') deltas?.push(e.delta);
          }
        } catch (err) {
          throw retryableOrNot(err);
        }
        await deltas?.flush();
        const done = events.find((e) => e.type === 'response_done');
        return {
          requestId: typeof done?.response.id === 'string' ? done.response.id : null,
          usage: flatUsage(done?.response.usage),
          result: toJsonValue(events),
        };
      });
      for (const e of fromJsonValue<StreamEvent[]>(recorded.result)) yield e;
    },
    // The runner's own retries (modelSettings.retry) never run on top of the step's: an abort is the
    // one veto no retry policy of the runner overrides, and a model step's failure is final.
    getRetryAdvice(): ModelRetryAdvice {
      return {
        suggested: false,
        replaySafety: 'unsafe',
        reason: 'nestjs-durable-execution: the model step owns the retries of this call',
        normalized: { isAbort: true },
      };
    },
  };
  if (model.supportsPromptModelSelection !== undefined)
    Object.defineProperty(durable, 'supportsPromptModelSelection', {
      value: model.supportsPromptModelSelection,
    });
  return durable;
}

/**
 * A model provider of the OpenAI Agents SDK made durable inside a run: pass it as the runner's
 * `modelProvider`, as in
 * `new Runner({ modelProvider: durableModelProvider(ctx, provider), tracingDisabled: true })`.
 * Each model it hands out is `durableModel(ctx, model, { modelName })`. An agent whose
 * `model` is a Model object (not a name) does not go through the provider: `durableAgent` wraps those.
 */
export function durableModelProvider(
  ctx: RunContext,
  provider: ModelProvider,
  options: DurableAgentModelOptions = {},
): ModelProvider {
  if (!provider || typeof provider.getModel !== 'function')
    throw new TypeError('durableModelProvider takes a ModelProvider of the OpenAI Agents SDK (getModel)');
  return {
    async getModel(modelName?: string): Promise<Model> {
      return durableModel(ctx, await provider.getModel(modelName), {
        ...options,
        modelName: modelName ?? undefined,
      });
    },
  };
}

/** The request as sent: the run's signal linked in, the OpenAI client's own retries off. */
function innerRequest(request: ModelRequest, ctx: RunContext): ModelRequest {
  const internal = (request as { _internal?: object })._internal;
  // `_internal.runnerManagedRetry` is how the runner tells the SDK's OpenAI models to send a request
  // with `maxRetries: 0`: the step's retries are the only ones.
  return Object.assign({}, request, {
    signal: linkedSignal(request.signal, ctx),
    _internal: { ...internal, runnerManagedRetry: true },
  });
}

/** What a model call's fingerprint compares: the request without its signal, tracing and internals. */
function requestFingerprint(request: ModelRequest): unknown {
  const rest: Record<string, unknown> = { ...request };
  for (const k of ['signal', 'tracing', '_internal']) delete rest[k];
  return rest;
}

/** One request. A client error that says the request itself is wrong is never sent again. */
async function send<T>(request: () => PromiseLike<T>): Promise<T> {
  try {
    return await request();
  } catch (err) {
    throw retryableOrNot(err);
  }
}

const FINAL_STATUSES = new Set([400, 401, 403, 404, 422]);

function retryableOrNot(err: unknown): unknown {
  const status = err && typeof err === 'object' ? (err as { status?: unknown }).status : undefined;
  if (typeof status === 'number' && FINAL_STATUSES.has(status))
    Object.assign(err as object, { retryable: false });
  return err;
}

function flatUsage(usage: unknown): RecordedCall['usage'] {
  if (!usage || typeof usage !== 'object') return null;
  const u = usage as Record<string, unknown>;
  const n = (x: unknown) => (typeof x === 'number' && Number.isFinite(x) ? x : 0);
  const inputTokens = n(u.inputTokens ?? u.input_tokens);
  const outputTokens = n(u.outputTokens ?? u.output_tokens);
  return {
    inputTokens,
    outputTokens,
    totalTokens: n(u.totalTokens ?? u.total_tokens) || inputTokens + outputTokens,
  };
}

/** The SDK's `Usage` (a class the runner adds up) rebuilt from its recorded fields. */
async function usageOf(usage: unknown): Promise<ModelResponse['usage']> {
  const { Usage } = await import('@openai/agents');
  return new Usage((usage ?? {}) as ConstructorParameters<typeof Usage>[0]);
}
