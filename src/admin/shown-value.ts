import type { CheckpointView } from '../interfaces/run.interface';

/**
 * What a run detail shows in place of a checkpoint's output or meta larger than
 * `limits.maxShownValueBytes`: its size, and the route that answers the whole checkpoint.
 */
export interface TruncatedValue {
  $truncated: true;
  /** The value's size as JSON (UTF-8 bytes). */
  bytes: number;
  /** `api/runs/<id>/checkpoints/<stepIndex>` under the admin path: the checkpoint, its values whole. */
  fetch: string;
}

/** The UTF-8 bytes of `value` as JSON, or 0 when it has none. */
function jsonBytes(value: unknown): number {
  const text = JSON.stringify(value);
  return text === undefined ? 0 : Buffer.byteLength(text);
}

/** The value, or its TruncatedValue marker when its JSON is over `max` bytes. */
function capped(value: unknown, max: number, fetch: string): unknown {
  if (value === null || (typeof value !== 'object' && typeof value !== 'string')) return value;
  // A string's JSON is at least its length; a short one needs no serialization to be let through.
  if (typeof value === 'string' && value.length * 3 + 2 <= max) return value;
  const bytes = jsonBytes(value);
  return bytes > max ? ({ $truncated: true, bytes, fetch } satisfies TruncatedValue) : value;
}

/**
 * A checkpoint as a run detail or a checkpoints page shows it: its output and meta over `max` bytes
 * (their JSON, after the redact hook) replaced by a TruncatedValue. @internal
 */
export function cappedCheckpoint(c: CheckpointView, max: number): CheckpointView {
  const fetch = `api/runs/${c.runId}/checkpoints/${c.stepIndex}`;
  const output = capped(c.output, max, fetch);
  const meta = capped(c.meta, max, fetch) as CheckpointView['meta'];
  return output === c.output && meta === c.meta ? c : { ...c, output, meta };
}
