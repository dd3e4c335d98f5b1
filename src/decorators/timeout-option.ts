/**
 * What is wrong with a call's `timeoutMs` (undefined: the module's `defaultTimeoutMs`; 0: none), or
 * undefined when it is fine. @internal
 */
export function timeoutProblem(timeoutMs: unknown): string | undefined {
  if (timeoutMs === undefined) return undefined;
  if (typeof timeoutMs === 'number' && Number.isFinite(timeoutMs) && timeoutMs >= 0) return undefined;
  return `timeoutMs must be a number of milliseconds >= 0 (0: no timeout), got ${JSON.stringify(timeoutMs)}`;
}
