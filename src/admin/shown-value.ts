import type { CheckpointView } from '../interfaces/run.interface';

/**
 * What a run detail shows in place of a checkpoint's output or meta larger than
 * `limits.maxShownValueBytes`: its size, and the route that answers the whole checkpoint. The size is
 * measured by the database on the stored value, before the `redact` hook: a value over the cap is never
 * read into the process, nor redacted.
 */
export interface TruncatedValue {
  $truncated: true;
  /**
   * The stored value's size as JSON text (UTF-8 bytes) as PostgreSQL prints it (`octet_length(value::text)`:
   * a space after each `:` and `,`, so a little more than `JSON.stringify`'s).
   */
  bytes: number;
  /** `api/runs/<id>/checkpoints/<stepIndex>` under the admin path: the checkpoint, its values whole. */
  fetch: string;
}

/** The UTF-8 bytes of `value` as JSON, or 0 when it has none. */
function jsonBytes(value: unknown): number {
  const text = JSON.stringify(value);
  return text === undefined ? 0 : Buffer.byteLength(text);
}

/** The route that answers a checkpoint whole (under the admin path). @internal */
export function checkpointRoute(c: Pick<CheckpointView, 'runId' | 'stepIndex'>): string {
  return `api/runs/${c.runId}/checkpoints/${c.stepIndex}`;
}

/** The marker shown for a value of `bytes` over the cap. @internal */
export function truncated(bytes: number, fetch: string): TruncatedValue {
  return { $truncated: true, bytes, fetch };
}

/** Whether `a` is a TruncatedValue this module made. */
function isTruncated(a: unknown): a is TruncatedValue {
  return typeof a === 'object' && a !== null && (a as TruncatedValue).$truncated === true;
}

/** The value, or its TruncatedValue marker when its JSON is over `max` bytes. */
function capped(value: unknown, max: number, fetch: string): unknown {
  if (value === null || (typeof value !== 'object' && typeof value !== 'string')) return value;
  if (isTruncated(value)) return value;
  // A string's JSON is at least its length; a short one needs no serialization to be let through.
  if (typeof value === 'string' && value.length * 3 + 2 <= max) return value;
  const bytes = jsonBytes(value);
  return bytes > max ? truncated(bytes, fetch) : value;
}

/**
 * A checkpoint as a run detail or a checkpoints page shows it, after the values the database measured
 * over `max` were replaced (never read): the ones the redact hook made larger than `max` (their JSON)
 * replaced by a TruncatedValue too, so the answer stays bounded whatever the hook returns. The values
 * checked here were read under the cap, so this walks at most `max` bytes of each. @internal
 */
export function cappedCheckpoint(c: CheckpointView, max: number): CheckpointView {
  const fetch = checkpointRoute(c);
  const output = capped(c.output, max, fetch);
  const meta = capped(c.meta, max, fetch) as CheckpointView['meta'];
  return output === c.output && meta === c.meta ? c : { ...c, output, meta };
}
