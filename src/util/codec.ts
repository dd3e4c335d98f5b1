import { PayloadTooLargeError } from '../errors/payload-too-large.error';
import { SerializationError } from '../errors/serialization.error';
import { MAX_JSON_DEPTH, unstorableText } from './json';

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
  let copy: unknown;
  try {
    if (value === undefined)
      throw new SerializationError(subject, '$', 'is undefined (return null or an object)');
    copy = new Canonicalizer(subject, maxBytes).copy(value, 'top', 0);
  } catch (err) {
    if (err instanceof SerializationError || err instanceof PayloadTooLargeError) throw err;
    // A toJSON() or a getter that throws: the value can never be stored, retrying will not help.
    const why = err instanceof Error ? err.message : String(err);
    throw new SerializationError(subject, '$', `could not be serialised (${why})`);
  }
  // `copy` is plain JSON data with every object's keys in jsonb's order: its text is the stored form,
  // and JSON.parse of that text would give `copy` back (numbers round-trip, -0 is already 0).
  const text = JSON.stringify(copy);
  // Byte length only matters near the cap; string length is a cheap lower bound.
  if (text.length * 3 > maxBytes) {
    const bytes = Buffer.byteLength(text);
    if (bytes > maxBytes) throw new PayloadTooLargeError(subject, bytes, maxBytes);
  }
  return { json: text, value: copy };
}

/**
 * A step's result in its stored form: as `encodeValue`, but `undefined` (a step that returns nothing)
 * is stored as null and read back as undefined: its checkpoint's meta carries `UNDEFINED_META`.
 */
export function encodeOutput(value: unknown, subject: string, maxBytes: number): EncodedValue {
  return value === undefined ? { json: 'null', value: undefined } : encodeValue(value, subject, maxBytes);
}

/** The checkpoint meta of a result that was undefined (see `encodeOutput`). */
export const UNDEFINED_META = '{"undefined":true}';

/**
 * One walk that checks a value as JSON.stringify would see it (toJSON applied, boxed primitives
 * unwrapped, undefined fields dropped) and builds its stored form: fresh objects with their keys in
 * jsonb's order, -0 as 0. The JSON path of the value in hand is a stack, made a string only for an
 * error.
 */
class Canonicalizer {
  private readonly path: Array<string | number> = [];
  private readonly seen = new Set<object>();
  /** A lower bound of the stored text's bytes so far: past the cap, the walk stops at once. */
  private used = 0;

  constructor(
    private readonly subject: string,
    private readonly maxBytes: number,
  ) {}

  /** Counts `n` more bytes of the stored text (a lower bound); a value past the cap is refused now. */
  private spend(n: number): void {
    this.used += n;
    if (this.used > this.maxBytes) throw new PayloadTooLargeError(this.subject, this.used, this.maxBytes);
  }

  private fail(reason: string, badKey?: string): never {
    const p = this.path.map((k) => (typeof k === 'number' ? `[${k}]` : `.${k}`)).join('');
    const at = badKey === undefined ? p : `${p}[${JSON.stringify(badKey)}]`;
    throw new SerializationError(this.subject, `$${at}`, reason);
  }

  copy(v: unknown, at: Position, depth: number): unknown {
    switch (typeof v) {
      case 'string': {
        this.spend(v.length + 2); // quotes; UTF-8 is never shorter than the string's length
        const why = unstorableText(v);
        return why ? this.fail(why) : v;
      }
      case 'boolean':
        this.spend(4);
        return v;
      case 'number':
        this.spend(1);
        if (!Number.isFinite(v)) this.fail(`is ${v} (not a finite number)`);
        return v === 0 ? 0 : v; // -0 is stored as 0
      case 'bigint':
        return this.fail('is a BigInt (convert it to a string)');
      case 'function':
        return this.fail('is a function');
      case 'symbol':
        return this.fail('is a symbol');
      case 'undefined':
        if (at === 'field') return undefined; // dropped inside objects, as JSON does
        return this.fail(
          at === 'top' ? 'serialises to nothing (a toJSON() returned undefined)' : 'is undefined',
        );
    }
    if (v === null) return null;
    if (depth >= MAX_JSON_DEPTH) this.fail(`is nested deeper than ${MAX_JSON_DEPTH} levels`);
    const obj = v as Record<string, unknown>;
    if (typeof obj.toJSON === 'function') return this.copy(obj.toJSON(), at, depth);
    if (v instanceof Number || v instanceof String || v instanceof Boolean)
      return this.copy(v.valueOf(), at, depth);
    if (v instanceof Map || v instanceof Set)
      this.fail(`is a ${v.constructor.name} (convert it to an object or array)`);
    if (this.seen.has(obj)) this.fail('is a circular reference');
    this.seen.add(obj);
    const out = Array.isArray(v) ? this.array(v, depth) : this.object(obj, depth);
    this.seen.delete(obj);
    return out;
  }

  private array(v: unknown[], depth: number): unknown[] {
    this.spend(1 + v.length); // brackets and commas
    const out = new Array<unknown>(v.length);
    for (let i = 0; i < v.length; i++) {
      this.path.push(i);
      out[i] = this.copy(v[i], 'array', depth + 1);
      this.path.pop();
    }
    return out;
  }

  private object(obj: Record<string, unknown>, depth: number): Record<string, unknown> {
    const keys = Object.keys(obj);
    const vals: unknown[] = [];
    const kept: string[] = [];
    let sorted = true;
    let prev: string | null = null;
    this.spend(2);
    for (const k of keys) {
      const why = unstorableText(k);
      if (why) this.fail(`has a key that ${why}`, k);
      this.path.push(k);
      const c = this.copy(obj[k], 'field', depth + 1);
      this.path.pop();
      if (c === undefined) continue; // dropped: its key is not stored
      this.spend(k.length + 3); // "key":
      kept.push(k);
      vals.push(c);
      if (!isIndexKey(k)) {
        if (prev !== null && compareJsonbKeys(prev, k) > 0) sorted = false;
        prev = k;
      }
    }
    const order = kept.map((_, i) => i);
    if (!sorted) order.sort((a, b) => compareJsonbKeys(kept[a], kept[b]));
    const out: Record<string, unknown> = {};
    for (const i of order) {
      if (kept[i] === '__proto__')
        Object.defineProperty(out, '__proto__', {
          value: vals[i],
          enumerable: true,
          writable: true,
          configurable: true,
        });
      else out[kept[i]] = vals[i];
    }
    return out;
  }
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
  const c = k.charCodeAt(0);
  if (c < 48 || c > 57 || k.length > 10) return false; // the common case: not a digit, one test
  return /^(?:0|[1-9]\d*)$/.test(k) && Number(k) < 4294967295;
}

function isAscii(s: string): boolean {
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) > 0x7f) return false;
  return true;
}

/** jsonb's key order: shorter (in UTF-8 bytes) first, then by bytes. */
export function compareJsonbKeys(a: string, b: string): number {
  if (isAscii(a) && isAscii(b)) return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
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
