/**
 * The one rule for identifiers (a kind, a schedule's name, kind and cron, a signal name, a stream topic,
 * a tag, a concurrency key) and the one escape for what the CLI prints. Refused and escaped: the C0
 * controls and DEL (newline, tab, NUL, ESC), the C1 controls (U+0080-U+009F: NEL U+0085, CSI U+009B),
 * the line and paragraph separators U+2028 and U+2029, and the bidirectional controls (U+061C, U+200E,
 * U+200F, U+202A-U+202E, U+2066-U+2069). Any of them in a log line or a terminal can start a forged line,
 * drive the terminal, or show text in another order than it is stored.
 */
const UNSAFE = '\\u0000-\\u001f\\u007f-\\u009f\\u061c\\u200e\\u200f\\u2028-\\u202e\\u2066-\\u2069';
const FIRST_UNSAFE = new RegExp(`[${UNSAFE}]`);
const EVERY_UNSAFE = new RegExp(`[${UNSAFE}]`, 'g');

/** `\uXXXX` (lowercase hex, as JSON writes it) of one UTF-16 unit. */
const escaped = (c: string): string => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;

/**
 * Why `text` is not a safe identifier (it holds a character the rule refuses, named with where it is),
 * or null when it is one. @internal
 */
export function unsafeTextProblem(text: string): string | null {
  const found = FIRST_UNSAFE.exec(text);
  if (!found) return null;
  const code = found[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, '0');
  return (
    'must not contain control characters (newlines, tabs, NUL, ESC, C1 controls such as U+0085), ' +
    'line separators (U+2028, U+2029) or bidirectional controls (U+061C, U+200E, U+200F, U+202A-U+202E, ' +
    `U+2066-U+2069): found U+${code} at index ${found.index}; use printable characters only`
  );
}

/**
 * `text` with every character the rule refuses written as `\uXXXX` (ESC as `\u001b`): one line, shown
 * as stored, nothing a terminal acts on. Inside JSON text it stays valid JSON of the same value. @internal
 */
export function escapeUnsafeText(text: string): string {
  return text.replace(EVERY_UNSAFE, escaped);
}
