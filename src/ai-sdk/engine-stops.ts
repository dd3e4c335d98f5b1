import type { RunContext } from '../index';

/**
 * The engine stops a run by aborting its signal with the stop's error (a lost lease, a cancel, a
 * drain, a park, non-determinism, a misuse). The AI SDK catches every error a tool's `execute` throws
 * and hands it to the model as the tool's result: an engine stop must never go that way. A tool call
 * that ended while its run was stopping rethrows the stop, and the next model call (the SDK's next
 * turn) throws it before anything is asked, so it leaves `generateText` instead of reaching the model.
 */
export function checkRunning(ctx: RunContext): void {
  const signal = ctx.signal;
  if (signal.aborted) throw stopError(signal);
}

export function stopError(signal: AbortSignal): unknown {
  return signal.reason ?? new Error('the run stopped');
}
