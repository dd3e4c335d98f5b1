/**
 * What the Agents SDK hands over is JSON data almost everywhere (items, usage, raw provider payloads);
 * what is not (a Date, bytes of an image or a file, an Error, `undefined` in an array) is stored
 * tagged and rebuilt from what the library's codec hands back, on the first execution as on every
 * replay: the SDK gets the same values both times.
 */
const TAG = '$oa';

/** `value` as JSON data: Dates, bytes and Errors tagged, functions and AbortSignals dropped. */
export function toJsonValue(value: unknown): unknown {
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
  if (typeof AbortSignal !== 'undefined' && v instanceof AbortSignal) return undefined;
  if (v instanceof Error) {
    const e = v as Error & Record<string, unknown>;
    const fields: Record<string, unknown> = { name: e.name, message: e.message };
    for (const k of ['status', 'code', 'type', 'requestID'])
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

/**
 * A tool's output as JSON text when it is an object: the SDK hands the model `JSON.stringify(output)`,
 * and PostgreSQL's jsonb would hand back the keys sorted; kept as text, the model sees the key order
 * the tool returned, on the first execution as on every replay.
 */
export function toOrderedJson(value: unknown): unknown {
  const encoded = toJsonValue(value);
  return encoded !== null && typeof encoded === 'object'
    ? { [TAG]: 'json', v: JSON.stringify(encoded) }
    : encoded;
}

/** The value `toJsonValue` encoded, rebuilt from its JSON form (as stored or as the codec returned it). */
export function fromJsonValue<T = unknown>(json: unknown): T {
  return decode(json) as T;
}

function decode(v: unknown): unknown {
  if (v === null || typeof v !== 'object') return v;
  if (Array.isArray(v)) return v.map(decode);
  const o = v as Record<string, unknown>;
  if (typeof o[TAG] === 'string' && 'v' in o && Object.keys(o).length === 2) {
    const t = o.v;
    switch (o[TAG]) {
      case 'date':
        return new Date(typeof t === 'string' ? t : NaN);
      case 'bytes':
        return new Uint8Array(Buffer.from(String(t), 'base64'));
      case 'undefined':
        return undefined;
      case 'json':
        return decode(JSON.parse(String(t)));
      case 'error': {
        const f = (t ?? {}) as Record<string, unknown>;
        const e = new Error(typeof f.message === 'string' ? f.message : '');
        for (const [k, x] of Object.entries(f))
          if (k !== 'message') (e as unknown as Record<string, unknown>)[k] = decode(x);
        return e;
      }
      case 'escaped':
        return Object.fromEntries(Object.entries(t as object).map(([k, x]) => [k, decode(x)]));
    }
  }
  return Object.fromEntries(Object.entries(o).map(([k, x]) => [k, decode(x)]));
}
