import { InvalidArgumentError } from '../errors/invalid-argument.error';
import type { WorkflowMetadata } from '../interfaces/step-options.interface';
import { requireText } from './arguments';

/** The longest kind or concurrency key the runs table takes (`check (length(…) between 1 and 200)`). */
export const MAX_KIND_LENGTH = 200;

/**
 * The run's key for a per-key limit: `given` (StartRunOptions.concurrencyKey), else the workflow's
 * `concurrencyKey(input)` (a number becomes its decimal text; null or undefined: no key), checked as
 * a kind is (InvalidArgumentError naming `concurrencyKey`, before anything is written).
 */
export function concurrencyKeyOf(
  meta: WorkflowMetadata | undefined,
  input: unknown,
  given: unknown,
): string | null {
  const field = 'concurrencyKey';
  if (given !== undefined && given !== null) return requireShortText(given, field);
  return meta?.concurrencyKey ? keyFrom(meta.concurrencyKey, input, meta.kind, field) : null;
}

/**
 * A key the workflow computes from the input (`field`: the option's name): a string, or a number as its
 * decimal text; null for null or undefined. InvalidArgumentError naming `field` when it throws or is not
 * a short text.
 */
export function keyFrom(
  fn: (input: any) => unknown,
  input: unknown,
  kind: string,
  field: string,
): string | null {
  let key: unknown;
  try {
    key = fn(input);
  } catch (err) {
    throw new InvalidArgumentError(
      field,
      `could not be computed: @DurableWorkflow('${kind}')'s ${field}(input) threw ${(err as Error)?.message ?? String(err)}`,
    );
  }
  if (key === undefined || key === null) return null;
  if (typeof key === 'number' && Number.isFinite(key)) key = String(key);
  return requireShortText(key, `${field} (from @DurableWorkflow('${kind}')'s ${field}(input))`);
}

/** A non-empty string of at most MAX_KIND_LENGTH characters with no control character. */
export function requireShortText(value: unknown, field: string): string {
  const text = requireText(value, field);
  if (text.length > MAX_KIND_LENGTH)
    throw new InvalidArgumentError(
      field,
      `must be at most ${MAX_KIND_LENGTH} characters, got ${text.length}`,
    );
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(text))
    throw new InvalidArgumentError(field, 'must not contain control characters (newlines, tabs, NUL)');
  return text;
}
