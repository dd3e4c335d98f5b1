import { PayloadTooLargeError } from '../errors/payload-too-large.error';
import { SerializationError } from '../errors/serialization.error';

/**
 * Serialises a value that must round-trip through JSONB unchanged, or throws a typed error naming
 * the subject and the JSON path. Stricter than JSON.stringify, which silently turns NaN into null and
 * drops functions: a checkpoint that replays differently from what the step returned is a bug.
 */
export function toStoredJson(value: unknown, subject: string, maxBytes: number): string {
  if (value === undefined)
    throw new SerializationError(subject, '$', 'is undefined (return null or an object)');
  check(value, '$', subject, new Set());
  const text = JSON.stringify(value);
  // Byte length only matters near the cap; string length is a cheap lower bound.
  if (text.length * 3 > maxBytes) {
    const bytes = Buffer.byteLength(text);
    if (bytes > maxBytes) throw new PayloadTooLargeError(subject, bytes, maxBytes);
  }
  return text;
}

function check(v: unknown, path: string, subject: string, seen: Set<object>): void {
  switch (typeof v) {
    case 'string':
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
      return; // dropped inside objects, as JSON does
  }
  if (v === null) return;
  const obj = v as Record<string, unknown>;
  if (typeof obj.toJSON === 'function') {
    check(obj.toJSON(), path, subject, seen);
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
      if (v[i] === undefined) throw new SerializationError(subject, `${path}[${i}]`, 'is undefined');
      check(v[i], `${path}[${i}]`, subject, seen);
    }
  } else {
    for (const k of Object.keys(obj)) check(obj[k], `${path}.${k}`, subject, seen);
  }
  seen.delete(obj);
}
