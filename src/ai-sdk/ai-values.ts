/**
 * What the AI SDK hands over that JSON cannot hold: a model's `response.timestamp` (a Date), files and
 * reasoning data (Uint8Array), URLs, an `error` stream part (an Error). Before a result is stored it is
 * made JSON (each such value a tagged object), and what the step returns (the library's codec hands the
 * stored form back, on the first execution as on every replay) is rebuilt from the tags: the SDK gets
 * the same values both times.
 */

/** The tag key of an encoded value: `{ "$ai": "date", "v": "2026-…" }`. */
const TAG = '$ai';

type Tagged = { [TAG]: 'date' | 'bytes' | 'url' | 'error' | 'undefined' | 'escaped'; v: unknown };

/**
 * `value` as JSON data: Dates, Uint8Arrays (and Buffers), URLs and Errors tagged, functions and
 * AbortSignals dropped, `undefined` in arrays kept as a tag (the SDK's content arrays do not have holes,
 * but a tool's output may). An object that already has the tag key is escaped.
 */
export function toAiJson(value: unknown): unknown {
  return encode(value, new Set());
}

function encode(v: unknown, seen: Set<object>): unknown {
  if (v === null || typeof v !== 'object') {
    if (typeof v === 'function' || typeof v === 'symbol') return undefined;
    if (typeof v === 'bigint') return v.toString();
    return v;
  }
  if (v instanceof Date) return { [TAG]: 'date', v: Number.isNaN(v.getTime()) ? null : v.toISOString() };
  if (v instanceof Uint8Array)
    return { [TAG]: 'bytes', v: Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64') };
  if (v instanceof ArrayBuffer) return { [TAG]: 'bytes', v: Buffer.from(v).toString('base64') };
  if (v instanceof URL) return { [TAG]: 'url', v: v.href };
  if (typeof AbortSignal !== 'undefined' && v instanceof AbortSignal) return undefined;
  if (v instanceof Error) {
    const e = v as Error & Record<string, unknown>;
    const fields: Record<string, unknown> = { name: e.name, message: e.message };
    for (const k of ['statusCode', 'isRetryable', 'code', 'responseBody', 'url'])
      if (e[k] !== undefined) fields[k] = encode(e[k], seen);
    return { [TAG]: 'error', v: fields };
  }
  if (seen.has(v)) return undefined; // a cycle: JSON could not hold it either
  seen.add(v);
  try {
    if (Array.isArray(v))
      return v.map((x) => {
        const e = encode(x, seen);
        return e === undefined ? { [TAG]: 'undefined', v: null } : e;
      });
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) {
      const e = encode(x, seen);
      if (e !== undefined) out[k] = e;
    }
    return TAG in out ? { [TAG]: 'escaped', v: out } : out;
  } finally {
    seen.delete(v);
  }
}

/** The value `toAiJson` encoded, rebuilt from its JSON form (as stored or as the codec returned it). */
export function fromAiJson<T = unknown>(json: unknown): T {
  return decode(json) as T;
}

function decode(v: unknown): unknown {
  if (v === null || typeof v !== 'object') return v;
  if (Array.isArray(v)) return v.map(decode);
  const o = v as Record<string, unknown>;
  if (typeof o[TAG] === 'string' && 'v' in o && Object.keys(o).length === 2) {
    const t = o as Tagged;
    switch (t[TAG]) {
      case 'date':
        return new Date(typeof t.v === 'string' ? t.v : NaN);
      case 'bytes':
        return new Uint8Array(Buffer.from(String(t.v), 'base64'));
      case 'url':
        return new URL(String(t.v));
      case 'undefined':
        return undefined;
      case 'error': {
        const f = (t.v ?? {}) as Record<string, unknown>;
        const e = new Error(typeof f.message === 'string' ? f.message : '');
        for (const [k, x] of Object.entries(f))
          if (k !== 'message') (e as unknown as Record<string, unknown>)[k] = decode(x);
        return e;
      }
      case 'escaped': {
        const inner = t.v as Record<string, unknown>;
        return Object.fromEntries(Object.entries(inner).map(([k, x]) => [k, decode(x)]));
      }
    }
  }
  return Object.fromEntries(Object.entries(o).map(([k, x]) => [k, decode(x)]));
}
