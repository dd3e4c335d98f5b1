import { currentRun } from '../index';
import type { RunContext } from '../index';
import { fromAiJson, toAiJson } from './ai-values';

/** How many attempts of a model call failed so far (across claims), and the last one's error. */
interface FailedAttempts {
  failed: number;
  error: unknown;
}

/** The attempts a model call gets in all when `durableModel`'s `retry` names none. */
export const DEFAULT_MODEL_ATTEMPTS = 3;

/**
 * A model step's body, its failed attempts counted across claims: the engine retries a step within
 * a claim, so a worker that dies between two attempts would give the next claim `maxAttempts` more.
 * Each failed attempt (an error the provider may answer differently next time) is recorded in the
 * step's cursor (`ctx.progress`, one fenced statement) before it is retried, and an attempt that
 * finds `maxAttempts` failures recorded sends nothing: it fails with the last one's error, for good.
 * An engine stop (the run's signal aborted) is not an attempt of the call.
 */
export function countedAttempts<T>(
  ctx: RunContext,
  maxAttempts: number,
  body: () => Promise<T>,
): () => Promise<T> {
  return async () => {
    const run = currentRun() ?? ctx;
    const before = run.resumePoint<FailedAttempts>()?.partial;
    const failed = typeof before?.failed === 'number' ? before.failed : 0;
    if (failed >= maxAttempts) throw final(fromAiJson(before!.error));
    try {
      return await body();
    } catch (err) {
      if (run.signal.aborted || !err || typeof err !== 'object') throw err;
      if ((err as { retryable?: unknown }).retryable === false) throw err;
      await run.progress(failed + 1, { failed: failed + 1, error: toAiJson(err) } satisfies FailedAttempts);
      throw failed + 1 >= maxAttempts ? final(err) : err;
    }
  };
}

/** The error of a call whose attempts are spent: not retried by the step, nor by a later claim. */
function final(err: unknown): unknown {
  const e = err && typeof err === 'object' ? err : new Error(String(err));
  return Object.assign(e, { retryable: false });
}
