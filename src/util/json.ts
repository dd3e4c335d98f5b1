/** Deepest nesting a stored value may have (PostgreSQL's jsonb and our own checks recurse). */
export const MAX_JSON_DEPTH = 256;

type WellFormed = { isWellFormed(): boolean; toWellFormed(): string };

/**
 * Why PostgreSQL would refuse this string in jsonb or text, or null when it is fine: jsonb cannot
 * hold U+0000, and a lone UTF-16 surrogate is not valid Unicode (no UTF-8 encoding exists).
 */
export function unstorableText(s: string): string | null {
  if (s.includes('\u0000')) return 'contains a NUL character (\\u0000), which PostgreSQL cannot store';
  if (!(s as unknown as WellFormed).isWellFormed())
    return 'contains a lone UTF-16 surrogate (not valid Unicode), which PostgreSQL cannot store';
  return null;
}

/** Replaces NUL and lone surrogates by U+FFFD: for recording errors, which must never fail. */
export function storableText(s: string): string {
  const w = (s as unknown as WellFormed).toWellFormed();
  return w.includes('\u0000') ? w.split('\u0000').join('\uFFFD') : w;
}

/**
 * A deep copy of `value` that PostgreSQL can always store: strings made storable, non-JSON values
 * dropped or stringified, nesting cut at MAX_JSON_DEPTH. Last resort for error records and events.
 */
export function storableJson(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return storableText(value);
  if (typeof value === 'number') return Number.isFinite(value) ? value : null;
  if (typeof value === 'boolean' || value === null) return value;
  if (typeof value === 'bigint') return value.toString();
  if (typeof value !== 'object') return undefined;
  if (depth >= MAX_JSON_DEPTH) return '[nested too deep]';
  if (Array.isArray(value)) return value.map((v) => storableJson(v, depth + 1) ?? null);
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    const s = storableJson(v, depth + 1);
    if (s !== undefined) out[storableText(k)] = s;
  }
  return out;
}

/**
 * Whether `value` nests objects or arrays deeper than `max` levels (the top level is level 0, as in
 * toStoredJson). Iterative, so asking about a value nested 100,000 deep cannot overflow the stack.
 */
export function nestedDeeperThan(value: unknown, max: number): boolean {
  const stack: Array<[unknown, number]> = [[value, 0]];
  while (stack.length) {
    const [v, depth] = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    if (depth >= max) return true;
    for (const child of Object.values(v)) stack.push([child, depth + 1]);
  }
  return false;
}

/** Deep equality of two JSON values, key order ignored (jsonb reorders keys). */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  if (ka.length !== kb.length) return false;
  return ka.every((k) => jsonEqual((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
}
