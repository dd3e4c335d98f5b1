import { PayloadTooLargeError } from '../errors/payload-too-large.error';
import { SerializationError } from '../errors/serialization.error';

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

/**
 * Serialises a value that must round-trip through JSONB unchanged, or throws a typed error naming
 * the subject and the JSON path. Stricter than JSON.stringify, which silently turns NaN into null and
 * drops functions: a checkpoint that replays differently from what the step returned is a bug. Also
 * refuses what jsonb refuses (NUL, lone surrogates) and nesting deeper than MAX_JSON_DEPTH, so
 * nothing reaches PostgreSQL that it would reject. The text is in the stored form (object keys in
 * jsonb's order, see `encodeValue`).
 */
export function toStoredJson(value: unknown, subject: string, maxBytes: number): string {
  return encodeValue(value, subject, maxBytes).json;
}

/** A value in its stored form: the JSON text written, and the value every reader of it gets. */
export interface EncodedValue {
  json: string;
  value: unknown;
}

/**
 * The one codec: `value` as it will be stored (`json`) and as every reader gets it back (`value`),
 * the first execution included. What JSON does applies (toJSON, dates as ISO strings, undefined
 * fields dropped, -0 as 0), and object keys come in jsonb's order (shorter keys first, then by
 * bytes), because that is the order PostgreSQL hands them back in on every replay.
 */
export function encodeValue(value: unknown, subject: string, maxBytes: number): EncodedValue {
  let text: string | undefined;
  try {
    if (value === undefined)
      throw new SerializationError(subject, '$', 'is undefined (return null or an object)');
    check(value, '$', subject, new Set(), 0, 'top');
    text = JSON.stringify(value);
  } catch (err) {
    if (err instanceof SerializationError) throw err;
    // A toJSON() or a getter that throws: the value can never be stored, retrying will not help.
    const why = err instanceof Error ? err.message : String(err);
    throw new SerializationError(subject, '$', `could not be serialised (${why})`);
  }
  if (text === undefined)
    throw new SerializationError(subject, '$', 'serialises to nothing (a toJSON() returned undefined)');
  let decoded: unknown = JSON.parse(text);
  if (!isCanonical(decoded)) {
    text = canonicalJson(decoded);
    decoded = JSON.parse(text);
  }
  // Byte length only matters near the cap; string length is a cheap lower bound.
  if (text.length * 3 > maxBytes) {
    const bytes = Buffer.byteLength(text);
    if (bytes > maxBytes) throw new PayloadTooLargeError(subject, bytes, maxBytes);
  }
  return { json: text, value: decoded };
}

/**
 * A value read back from a jsonb column (node-postgres parsed it), as the codec hands it over: keys
 * in jsonb's order. PostgreSQL already returns them so; this only rebuilds a value that is not.
 */
export function decodeStored<T = unknown>(value: T): T {
  return isCanonical(value) ? value : (JSON.parse(canonicalJson(value)) as T);
}

/** An array index as JavaScript orders it: such keys come first in every object, ascending. */
function isIndexKey(k: string): boolean {
  return /^(?:0|[1-9]\d{0,9})$/.test(k) && Number(k) < 4294967295;
}

/** jsonb's key order: shorter (in UTF-8 bytes) first, then by bytes. */
export function compareJsonbKeys(a: string, b: string): number {
  // eslint-disable-next-line no-control-regex
  if (/^[\x00-\x7f]*$/.test(a) && /^[\x00-\x7f]*$/.test(b))
    return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
  const ba = Buffer.from(a);
  const bb = Buffer.from(b);
  return ba.length - bb.length || Buffer.compare(ba, bb);
}

/**
 * Whether the JSON data `v` (parsed, so only plain objects, arrays and primitives) has every object's
 * keys in the order JSON.parse gives them from jsonb's text: index keys first (JavaScript puts them
 * there whatever the text says), then the others in jsonb's order.
 */
function isCanonical(v: unknown): boolean {
  const stack: unknown[] = [v];
  while (stack.length) {
    const x = stack.pop();
    if (x === null || typeof x !== 'object') continue;
    if (Array.isArray(x)) {
      for (const e of x) if (e !== null && typeof e === 'object') stack.push(e);
      continue;
    }
    let prev: string | null = null;
    for (const k of Object.keys(x)) {
      const e = (x as Record<string, unknown>)[k];
      if (e !== null && typeof e === 'object') stack.push(e);
      if (isIndexKey(k)) continue;
      if (prev !== null && compareJsonbKeys(prev, k) >= 0) return false;
      prev = k;
    }
  }
  return true;
}

/** JSON text of the JSON data `v` with every object's keys in jsonb's order. */
function canonicalJson(v: unknown): string {
  if (v === null || typeof v !== 'object') return JSON.stringify(v) ?? 'null';
  if (Array.isArray(v)) return `[${v.map((e) => canonicalJson(e)).join(',')}]`;
  const o = v as Record<string, unknown>;
  const keys = Object.keys(o)
    .filter((k) => o[k] !== undefined)
    .sort(compareJsonbKeys);
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(o[k])}`).join(',')}}`;
}

type Position = 'top' | 'array' | 'field';

function check(
  v: unknown,
  path: string,
  subject: string,
  seen: Set<object>,
  depth: number,
  at: Position,
): void {
  switch (typeof v) {
    case 'string': {
      const why = unstorableText(v);
      if (why) throw new SerializationError(subject, path, why);
      return;
    }
    case 'boolean':
      return;
    case 'number':
      if (!Number.isFinite(v)) throw new SerializationError(subject, path, `is ${v} (not a finite number)`);
      return;
    case 'bigint':
      throw new SerializationError(subject, path, 'is a BigInt (convert it to a string)');
    case 'function':
      throw new SerializationError(subject, path, 'is a function');
    case 'symbol':
      throw new SerializationError(subject, path, 'is a symbol');
    case 'undefined':
      if (at === 'field') return; // dropped inside objects, as JSON does
      throw new SerializationError(
        subject,
        path,
        at === 'top' ? 'serialises to nothing (a toJSON() returned undefined)' : 'is undefined',
      );
  }
  if (v === null) return;
  if (depth >= MAX_JSON_DEPTH)
    throw new SerializationError(subject, path, `is nested deeper than ${MAX_JSON_DEPTH} levels`);
  const obj = v as Record<string, unknown>;
  if (typeof obj.toJSON === 'function') {
    check(obj.toJSON(), path, subject, seen, depth, at);
    return;
  }
  if (v instanceof Map || v instanceof Set) {
    throw new SerializationError(
      subject,
      path,
      `is a ${v.constructor.name} (convert it to an object or array)`,
    );
  }
  if (seen.has(obj)) throw new SerializationError(subject, path, 'is a circular reference');
  seen.add(obj);
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      check(v[i], `${path}[${i}]`, subject, seen, depth + 1, 'array');
    }
  } else {
    for (const k of Object.keys(obj)) {
      const why = unstorableText(k);
      if (why)
        throw new SerializationError(subject, `${path}[${JSON.stringify(k)}]`, `has a key that ${why}`);
      check(obj[k], `${path}.${k}`, subject, seen, depth + 1, 'field');
    }
  }
  seen.delete(obj);
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
