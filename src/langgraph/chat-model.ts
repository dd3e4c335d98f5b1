import type { CallbackManagerForLLMRun } from '@langchain/core/callbacks/manager';
import type { BaseChatModel } from '@langchain/core/language_models/chat_models';
import type { BaseMessage } from '@langchain/core/messages';
import type { ChatResult } from '@langchain/core/outputs';
import { LeaseLostError } from '../index';
import type { RetryPolicy } from '../index';
import { modelRef } from './graph-calls';
import { currentGraph } from './graph-frame';
import type { GraphFrame, ModelEntry } from './graph-frame';
import { answerOf, modelEntry, modelKey, rebuiltError, storedError } from './model-calls';
import { AttemptPlan, attempts, MODEL_RETRY } from './model-retry';

/** Options of `durableChatModel`. */
export interface DurableChatModelOptions {
  /** The name of its calls in the graph's journal (default `model:<the model's model id or name>`). */
  name?: string;
  /**
   * The one retry policy of a call (default: 3 attempts in all, 200 ms doubling to at most 10 s, 20 %
   * jitter: the engine's defaults). A request that failed is sent again up to `maxAttempts` in all,
   * counted across claims (a worker that dies between two attempts leaves the next claim only those
   * left), unless the model's own rules say it must not be (LangChain's: a 400, 401, 403, 404…, an
   * exhausted quota). The last error fails the run at once (not retried by the engine, not
   * dead-lettered), and is recorded: a replay throws it again without a request. The model's own
   * retries are off: the wrapper sets its `maxRetries` to 0.
   */
  retry?: RetryPolicy;
  /** Abort an attempt (and retry it as the policy says) when it runs longer than this. */
  timeoutMs?: number;
}

type Generate = (
  messages: BaseMessage[],
  options: any,
  run?: CallbackManagerForLLMRun,
) => Promise<ChatResult>;
type Caller = NonNullable<AttemptPlan['caller']> & { maxRetries: number };

/**
 * A LangChain chat model (`ChatOpenAI`, `ChatAnthropic`, any `BaseChatModel`) whose calls inside
 * `runGraph` are recorded once: use it in the graph's nodes in place of the model (`bindTools`,
 * `withStructuredOutput` and `invoke` work as on the model). Each call's answer and its token counts
 * are journaled with the graph and written (fenced) before the node gets the answer, so a node run
 * again after a crash, a drain or an `interrupt()` gets the same answer without calling the model
 * again; the answer a node gets the first time is the recorded one, read back. The calls take no
 * position in the run: nodes running at once may call the model in any order.
 *
 * One retry policy, the only one: the model's `maxRetries` is 0 (its `AsyncCaller`, through which
 * LangChain's integrations send every request; a call's own `maxRetries` option too) and `retry`
 * retries a failed request; its last error fails the run (`retryable: false`), so no claim sends it
 * again. The model is not changed: the wrapper is a new object on top of it. It does not stream (the
 * answer arrives whole). Outside `runGraph` it calls the model with the same retries, unrecorded.
 * @example
 * ```ts
 * const model = durableChatModel(new ChatOpenAI({ model: 'gpt-4.1' })).bindTools(tools);
 * ```
 */
export function durableChatModel<M extends BaseChatModel<any, any>>(
  model: M,
  options: DurableChatModelOptions = {},
): M {
  const generate = (model as { _generate?: unknown })?._generate;
  if (!model || typeof generate !== 'function')
    throw new TypeError('durableChatModel takes a LangChain chat model (a BaseChatModel: ChatOpenAI, ...)');
  const policy = { ...MODEL_RETRY, ...options.retry };
  const modelId = (model as { model?: unknown }).model;
  const name = options.name ?? `model:${typeof modelId === 'string' ? modelId : model.getName()}`;
  const caller = (model as unknown as { caller?: Caller }).caller;
  const durable = Object.create(model) as M;
  // The model's retries off: its caller (the queue and its concurrency kept), its field if it has one.
  if (caller) own(durable, 'caller', Object.assign(Object.create(caller) as Caller, { maxRetries: 0 }));
  if ('maxRetries' in model) own(durable, 'maxRetries', 0);
  own(durable, 'disableStreaming', true);

  const send = (
    messages: BaseMessage[],
    opts: any,
    run: CallbackManagerForLLMRun | undefined,
    plan: Partial<AttemptPlan>,
  ) => {
    const stops = [opts?.signal, currentGraph()?.ctx.signal].filter((s): s is AbortSignal => !!s);
    return attempts(
      { policy, timeoutMs: options.timeoutMs, name, stops, caller, prior: 0, ...plan },
      (signal) => (generate as Generate).call(durable, messages, { ...opts, maxRetries: 0, signal }, run),
    );
  };
  own(durable, '_generate', async (messages: BaseMessage[], opts: any, run?: CallbackManagerForLLMRun) => {
    const frame = currentGraph();
    if (!frame) return send(messages, opts, run, {});
    const key = modelKey(frame, messages, opts ?? {});
    const outcome = frame.known.get(modelRef(key));
    const known = outcome?.ok ? (outcome.value as ModelEntry) : undefined;
    if (known?.answer) return answerOf(frame, known.answer);
    if (known?.error) throw rebuiltError(known.error);
    const record = (entry: ModelEntry) => journal(frame, entry);
    let result: ChatResult;
    try {
      result = await send(messages, opts, run, {
        prior: known?.failures ?? 0,
        failed: (failures) => record({ kind: 'model', name, key, failures }),
      });
    } catch (err) {
      // The run stopping (its signal, or a journal write refused: the claim lost): nothing recorded.
      if (opts?.signal?.aborted || frame.ctx.signal.aborted || err instanceof LeaseLostError) throw err;
      const error = storedError(err);
      await record({ kind: 'model', name, key, error });
      throw rebuiltError(error); // the recorded failure, as a replay throws it
    }
    const entry = await modelEntry(frame, name, key, result);
    await record(entry); // durable before the node acts on it
    return answerOf(frame, entry.answer!); // the recorded answer, as a node run again gets it
  });
  return durable;
}

/** Journals a model entry (the last of its key counts) and writes the journal now. */
async function journal(frame: GraphFrame, entry: ModelEntry): Promise<void> {
  frame.journal.push({ entry, done: true });
  frame.known.set(modelRef(entry.key), { ok: true, value: entry });
  await frame.recorder.flush();
}

function own(o: object, key: string, value: unknown): void {
  Object.defineProperty(o, key, { value, writable: true, enumerable: true, configurable: true });
}
