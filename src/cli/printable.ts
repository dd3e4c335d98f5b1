import { escapeUnsafeText } from '../util/safe-text';

/**
 * The CLI's one escape for what it prints: a line with every control, line separator and bidi control
 * character written as `\uXXXX` (ESC as `\u001b`, a newline as `\u000a`), so a stored value (a kind, a
 * schedule's name, an error) cannot end the line, forge another one or drive the terminal. @internal
 */
export function printable(line: string): string {
  return escapeUnsafeText(line);
}

/**
 * `value` as the CLI's `--json` prints it: indented JSON, with the characters JSON.stringify leaves raw
 * (C1 controls, DEL, U+2028, U+2029, bidi controls) escaped too; still valid JSON of the same value. @internal
 */
export function printableJson(value: unknown): string {
  return printableJsonText(JSON.stringify(value, null, 2) ?? 'null');
}

/** JSON text from JSON.stringify, escaped as `printableJson` does. @internal */
export function printableJsonText(text: string): string {
  // JSON.stringify escapes every C0 control inside strings: a raw newline is only its indentation.
  return text.split('\n').map(printable).join('\n');
}
