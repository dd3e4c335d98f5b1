import type { ResolvedDurableOptions } from '../options/durable-execution-options.interface';

/** Serialises an event payload after the app's `redact` hook, if any. @internal */
export function eventPayload(
  options: Pick<ResolvedDurableOptions, 'redact'>,
  type: string,
  payload: Record<string, unknown>,
): string {
  return JSON.stringify(options.redact ? options.redact(type, payload) : payload);
}
