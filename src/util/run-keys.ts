import { InvalidArgumentError } from '../errors/invalid-argument.error';
import type { WorkflowMetadata } from '../interfaces/step-options.interface';
import { requireSafeText, requireText } from './arguments';

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
 * The key of the runs a schedule named `name` starts: its `concurrencyKey`, else the workflow's
 * `concurrencyKey` of the schedule's input with `schedule` (InvalidArgumentError when it throws or is not
 * a short text), else null.
 */
export function scheduleKeyOf(
  meta: WorkflowMetadata | undefined,
  name: string,
  s: { concurrencyKey?: string; input: Record<string, unknown> },
): string | null {
  return concurrencyKeyOf(meta, { ...s.input, schedule: name }, s.concurrencyKey);
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

/**
 * An identifier (a kind, a key, a topic, a tag, a schedule's name): a non-empty string of at most
 * MAX_KIND_LENGTH characters that passes the identifier rule (no control, line separator or bidi
 * control character: util/safe-text).
 */
export function requireShortText(value: unknown, field: string): string {
  const text = requireText(value, field);
  if (text.length > MAX_KIND_LENGTH)
    throw new InvalidArgumentError(
      field,
      `must be at most ${MAX_KIND_LENGTH} characters, got ${text.length}`,
    );
  return requireSafeText(text, field);
}

/** At most this many tags per run. */
export const MAX_TAGS = 16;
const TAG_KEY = /^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,63}$/;

/**
 * Tags as a run stores them: an object of at most MAX_TAGS entries, each key 1-64 letters, digits and
 * `_ . : -`, each value an identifier (`requireShortText`: at most 200 characters). Returns them as
 * JSON text (null for none), or throws InvalidArgumentError naming `field` (and the key).
 */
export function requireTags(value: unknown, field: string, optional = true): string | null {
  if ((value === undefined || value === null) && optional) return null;
  if (!value || typeof value !== 'object' || Array.isArray(value))
    throw new InvalidArgumentError(field, 'must be an object of string values, e.g. { tenant: "acme" }');
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length > MAX_TAGS)
    throw new InvalidArgumentError(field, `must have at most ${MAX_TAGS} tags, got ${entries.length}`);
  for (const [k, v] of entries) {
    if (!TAG_KEY.test(k))
      throw new InvalidArgumentError(`${field}.${k}`, 'is not a tag name: 1-64 letters, digits and _ . : -');
    if (typeof v !== 'string')
      throw new InvalidArgumentError(`${field}.${k}`, `must be a string, got ${typeof v}`);
    requireShortText(v, `${field}.${k}`);
  }
  return entries.length ? JSON.stringify(value) : null;
}
