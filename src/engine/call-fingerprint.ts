import * as crypto from 'node:crypto';

/** Node's one-shot digest (20.12+): no Hash object per call, the same bytes hashed. */
const oneShot = (crypto as { hash?: (algorithm: string, data: string, encoding: 'base64url') => string })
  .hash;

/** A short hash of a call: its name and its arguments as JSON; null when they do not serialise. */
export function callFingerprint(name: string, argsJson: string | null): string | null {
  if (argsJson === null) return null;
  const digest = oneShot
    ? oneShot('sha256', `${name}\u0001${argsJson}`, 'base64url')
    : crypto.createHash('sha256').update(name).update('\u0001').update(argsJson).digest('base64url');
  return digest.slice(0, 22);
}

/** Object keys sorted: jsonb reorders keys, so a value read back from a checkpoint must hash the same. */
function sortedKeys(_key: string, value: unknown): unknown {
  if (!value || typeof value !== 'object' || Array.isArray(value)) return value;
  const obj = value as Record<string, unknown>;
  return Object.fromEntries(
    Object.keys(obj)
      .sort()
      .map((k) => [k, obj[k]]),
  );
}

/**
 * Canonical JSON of a call's arguments for its fingerprint (keys sorted), or null when they are not
 * plain JSON (then the call is not compared).
 */
export function argsJson(args: unknown): string | null {
  try {
    return JSON.stringify(args, sortedKeys) ?? null;
  } catch {
    return null;
  }
}
