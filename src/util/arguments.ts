import { InvalidArgumentError } from '../errors/invalid-argument.error';
import { unstorableText } from './json';
import { unsafeTextProblem } from './safe-text';

/**
 * Longest idempotency key `start` accepts, in UTF-8 bytes. Keys live in a unique btree index, whose
 * rows cannot exceed about 2.7 KB; 512 bytes leaves room and is plenty for any natural key.
 */
export const MAX_IDEMPOTENCY_KEY_BYTES = 512;
/** Longest signal name, in UTF-8 bytes (names are indexed too). */
export const MAX_SIGNAL_NAME_BYTES = 512;
/** Range of a PostgreSQL `integer` (int4): maxAttempts and priority are stored as one. */
export const INT4_MIN = -2147483648;
export const INT4_MAX = 2147483647;
/**
 * Earliest and latest instant accepted for `runAt` and time filters: 1970-01-01 to the end of year
 * 9999 (UTC). PostgreSQL's timestamptz spans 4713 BC..294276 AD and JavaScript dates reach 271821 BC,
 * so a Date can be valid in JavaScript and still be refused by the database.
 */
export const MIN_TIMESTAMP_MS = Date.UTC(1970, 0, 1);
export const MAX_TIMESTAMP_MS = Date.UTC(10000, 0, 1) - 1;

/**
 * Checks text bound for a text or jsonb column: a string (non-empty unless `allowEmpty`), storable by
 * PostgreSQL (no NUL, no lone surrogate), at most `maxBytes` UTF-8 bytes. Returns it, or throws
 * InvalidArgumentError naming `field`. `undefined` and `null` pass when `optional`.
 */
export function requireText(
  value: unknown,
  field: string,
  opts: { optional?: boolean; allowEmpty?: boolean; maxBytes?: number } = {},
): string {
  if (value === undefined || value === null) {
    if (opts.optional) return value as unknown as string;
    throw new InvalidArgumentError(field, 'is required (a string)');
  }
  if (typeof value !== 'string')
    throw new InvalidArgumentError(field, `must be a string, got ${typeof value}`);
  if (!value && !opts.allowEmpty) throw new InvalidArgumentError(field, 'must be a non-empty string');
  const why = unstorableText(value);
  if (why) throw new InvalidArgumentError(field, why);
  if (opts.maxBytes !== undefined && value.length > opts.maxBytes / 3) {
    const bytes = Buffer.byteLength(value);
    if (bytes > opts.maxBytes)
      throw new InvalidArgumentError(
        field,
        `is ${bytes} bytes in UTF-8, above the limit of ${opts.maxBytes}`,
      );
  }
  return value;
}

/** An integer in [min, INT4_MAX] (a PostgreSQL `integer`), or InvalidArgumentError naming `field`. */
export function requireInt4(value: unknown, field: string, min = INT4_MIN): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > INT4_MAX) {
    throw new InvalidArgumentError(
      field,
      `must be an integer from ${min} to ${INT4_MAX}, got ${String(value)}`,
    );
  }
  return value;
}

/** A valid Date from 1970 to 9999 (MIN/MAX_TIMESTAMP_MS), or InvalidArgumentError naming `field`. */
export function requireTimestamp(value: unknown, field: string): Date {
  const ms = value instanceof Date ? value.getTime() : NaN;
  if (isNaN(ms)) throw new InvalidArgumentError(field, 'must be a valid Date');
  if (ms < MIN_TIMESTAMP_MS || ms > MAX_TIMESTAMP_MS) {
    throw new InvalidArgumentError(
      field,
      `must be between 1970-01-01 and 9999-12-31 (UTC), got ${(value as Date).toISOString()}`,
    );
  }
  return value as Date;
}

/**
 * `text` when it passes the identifier rule (no control, line separator or bidi control character:
 * util/safe-text); otherwise InvalidArgumentError naming `field`.
 */
export function requireSafeText(text: string, field: string): string {
  const why = unsafeTextProblem(text);
  if (why) throw new InvalidArgumentError(field, why);
  return text;
}

/**
 * A signal name `RunRepository.signal` may send: text of at most MAX_SIGNAL_NAME_BYTES that passes the
 * identifier rule, not starting with `$` (those are the engine's own: a child run's end is `$child:<id>`).
 */
export function requireSignalName(value: unknown, field: string): string {
  const name = requireSafeText(requireText(value, field, { maxBytes: MAX_SIGNAL_NAME_BYTES }), field);
  if (name.startsWith('$'))
    throw new InvalidArgumentError(field, "must not start with '$': those names are the engine's own");
  return name;
}
