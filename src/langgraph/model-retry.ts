import type { ChatResult } from '@langchain/core/outputs';
import { NonRetryableError } from '../index';
import type { RetryPolicy } from '../index';

/** The defaults of a `RetryPolicy` (the engine's own). */
export const MODEL_RETRY: Required<RetryPolicy> = {
  maxAttempts: 3,
  initialDelayMs: 200,
  multiplier: 2,
  maxDelayMs: 10_000,
  jitter: 0.2,
};

/** What a model call's attempts need: the policy, the stops, the model's own rules, where failures go. */
export interface AttemptPlan {
  policy: Required<RetryPolicy>;
  timeoutMs?: number;
  /** The call's name (in a timeout's message). */
  name: string;
  /** Signals that stop the call as it is (the run stopping, the caller's signal): nothing recorded. */
  stops: AbortSignal[];
  /** The model's `AsyncCaller`, whose `onFailedAttempt` says which errors must not be retried. */
  caller?: { onFailedAttempt?: (error: unknown) => unknown };
  /** Failed attempts an earlier claim made (they count against `maxAttempts`). */
  prior: number;
  /** Records `failures` failed attempts before the next one is sent (durable: a crash keeps the count). */
  failed?: (failures: number) => Promise<void>;
}

/**
 * The attempts of one call. An attempt that ran past `timeoutMs` is retried; another error is retried
 * unless the model's own rules refuse it (its caller's `onFailedAttempt` throws, as LangChain's default
 * does for a 4xx or an exhausted quota) or it is marked `retryable: false`. The last error is marked
 * `retryable: false` for the engine: the run fails, no later claim sends the request again. A stop
 * ends it with the stop's error as it is.
 */
export async function attempts(
  plan: AttemptPlan,
  attempt: (signal: AbortSignal | undefined) => Promise<ChatResult>,
): Promise<ChatResult> {
  const { policy, timeoutMs, stops } = plan;
  const stop = stops.length > 1 ? AbortSignal.any(stops) : stops[0];
  for (let n = plan.prior + 1; ; n++) {
    const timer = timeoutMs ? AbortSignal.timeout(timeoutMs) : undefined;
    const signal = timer ? (stop ? AbortSignal.any([stop, timer]) : timer) : stop;
    try {
      return await bounded(attempt(signal), timer);
    } catch (err) {
      if (stop?.aborted) throw err;
      const timedOut = timer?.aborted === true;
      const error = timedOut
        ? new Error(`${plan.name}: no answer within ${timeoutMs} ms`, { cause: err })
        : err;
      const refused = timedOut ? undefined : await refusal(plan.caller, err);
      if (refused !== undefined || n >= policy.maxAttempts) throw final(refused ?? error);
      await plan.failed?.(n);
      await pause(retryDelay(policy, n), stop);
    }
  }
}

/** `call`, or a rejection when `timer` fires first (a model that ignores its signal is not waited for). */
function bounded<T>(call: Promise<T>, timer: AbortSignal | undefined): Promise<T> {
  if (!timer) return call;
  call.catch(() => undefined); // an abandoned attempt's late error is dropped
  return new Promise<T>((resolve, reject) => {
    const onTimeout = () => reject(timer.reason);
    timer.addEventListener('abort', onTimeout, { once: true });
    call.then(resolve, reject).finally(() => timer.removeEventListener('abort', onTimeout));
  });
}

/** The error that must not be retried (the model's rules say so), or undefined. */
async function refusal(caller: AttemptPlan['caller'], err: unknown): Promise<unknown> {
  if (err && typeof err === 'object' && (err as { retryable?: unknown }).retryable === false) return err;
  try {
    await caller?.onFailedAttempt?.(err);
    return undefined;
  } catch (thrown) {
    return thrown ?? err;
  }
}

/** The call's last error, marked so the engine fails the run with it (no claim retries it). */
function final(err: unknown): unknown {
  if (err instanceof Error && Object.isExtensible(err)) return Object.assign(err, { retryable: false });
  return new NonRetryableError(err instanceof Error ? err.message : String(err), { cause: err });
}

/** Delay before retry number `n` (1-based): exponential, capped, with symmetric jitter (as the engine's). */
function retryDelay(policy: Required<RetryPolicy>, n: number): number {
  const raw = Math.min(policy.maxDelayMs, policy.initialDelayMs * policy.multiplier ** (n - 1));
  const spread = raw * policy.jitter;
  return Math.max(0, Math.round(raw - spread + Math.random() * 2 * spread));
}

/** Resolves after `ms`, or rejects with the signal's reason when it aborts first. */
function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
