import type { ResolvedDurableOptions } from '../options/durable-execution-options.interface';
import type { RedactKey } from '../options/redact';
import { storableJson } from '../util/json';

/** JSON escapes of what jsonb refuses: U+0000 and (lone) surrogates. Rare: checked on the text. */
const UNSTORABLE_ESCAPE = /\\u(0000|d[89a-f])/i;

/**
 * Serialises an event payload after the app's `redact` hook, if any. Recording never fails on the
 * payload's text: NUL and lone surrogates (an error message, a signal name) become U+FFFD. @internal
 */
export function eventPayload(
  options: Pick<ResolvedDurableOptions, 'redact'>,
  type: string,
  payload: Record<string, unknown>,
): string {
  const value = options.redact ? options.redact(type as RedactKey, payload) : payload;
  const text = JSON.stringify(value);
  return UNSTORABLE_ESCAPE.test(text) ? JSON.stringify(storableJson(value)) : text;
}
