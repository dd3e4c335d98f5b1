import { currentRun } from '../index';
import type { RunContext } from '../index';

/**
 * The caller's abort signal and the run's (fires when this worker loses the run, or it is cancelled;
 * its reason is the engine's error, which the SDK then rethrows instead of handing it to the model).
 */
export function linkedSignal(
  signal: AbortSignal | undefined,
  ctx: RunContext,
  own?: AbortSignal,
): AbortSignal {
  const signals = [signal, own ?? currentRun()?.signal ?? ctx.signal].filter((s): s is AbortSignal => !!s);
  return signals.length === 1 ? signals[0] : AbortSignal.any(signals);
}
