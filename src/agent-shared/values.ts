/**
 * What an agent SDK hands over that JSON cannot hold: a Date (a model's `response.timestamp`), bytes
 * (files, images, reasoning data: Uint8Array), URLs, Errors (an `error` stream part), `undefined` in an
 * array. Before a result is stored it is made JSON (each such value a tagged object), and what the step
 * returns (the library's codec hands the stored form back, on the first execution as on every replay)
 * is rebuilt from the tags: the SDK gets the same values both times.
 *
 * Shared by the `ai-sdk` and `openai-agents` subpaths; each has its own tag key (`$ai`, `$oa`), which
 * is part of what they store (and of a model call's fingerprint), so it never changes. Loads nothing of
 * either SDK.
 */

/** What a codec is made with: the parts of its stored form that differ between the SDKs. */
export interface ValueCodecOptions {
  /** The tag key of an encoded value: `{ "<tag>": "date", "v": "2026-…" }`. */
  tag: string;
  /** The fields of an Error kept besides `name` and `message` (the SDK's own error fields). */
  errorFields: readonly string[];
  /**
   * Whether URLs are stored tagged (and rebuilt as URLs); else a URL is stored as any other object
   * (`{}`). Decoding reads a `url` tag either way.
   */
  urls: boolean;
}

/** A value codec: JSON data to store, and the value rebuilt from it. */
export interface ValueCodec {
  /**
   * `value` as JSON data: Dates, Uint8Arrays (and Buffers, ArrayBuffers), URLs (if `urls`) and Errors
   * tagged, functions, symbols and AbortSignals dropped, bigints as text, `undefined` in arrays kept as
   * a tag (a tool's output may have one). A cycle is dropped. An object that already has the tag key
   * is stored `escaped` and rebuilt as it was.
   */
  toJson(value: unknown): unknown;
  /**
   * `value` encoded, an object or array kept as JSON text (`{ "<tag>": "json", "v": "{…}" }`): PostgreSQL's
   * jsonb hands an object's keys back sorted, text keeps the order they had.
   */
  toOrderedJson(value: unknown): unknown;
  /** The value `toJson` / `toOrderedJson` encoded, rebuilt from its JSON form (as stored or as the codec returned it). */
  fromJson<T = unknown>(json: unknown): T;
}

type Kind = 'date' | 'bytes' | 'url' | 'error' | 'undefined' | 'escaped' | 'json';

/** The value codec with these options. */
export function valueCodec(options: ValueCodecOptions): ValueCodec {
  const { tag, errorFields, urls } = options;
  const tagged = (kind: Kind, v: unknown) => ({ [tag]: kind, v });

  const encode = (v: unknown, seen: Set<object>): unknown => {
    if (v === null || typeof v !== 'object') {
      if (typeof v === 'function' || typeof v === 'symbol') return undefined;
      if (typeof v === 'bigint') return v.toString();
      return v;
    }
    if (v instanceof Date) return tagged('date', Number.isNaN(v.getTime()) ? null : v.toISOString());
    if (v instanceof Uint8Array)
      return tagged('bytes', Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64'));
    if (v instanceof ArrayBuffer) return tagged('bytes', Buffer.from(v).toString('base64'));
    if (urls && v instanceof URL) return tagged('url', v.href);
    if (typeof AbortSignal !== 'undefined' && v instanceof AbortSignal) return undefined;
    if (v instanceof Error) {
      const e = v as Error & Record<string, unknown>;
      const fields: Record<string, unknown> = { name: e.name, message: e.message };
      for (const k of errorFields) if (e[k] !== undefined) fields[k] = encode(e[k], seen);
      return tagged('error', fields);
    }
    if (seen.has(v)) return undefined; // a cycle: JSON could not hold it either
    seen.add(v);
    try {
      if (Array.isArray(v))
        return v.map((x) => {
          const e = encode(x, seen);
          return e === undefined ? tagged('undefined', null) : e;
        });
      const out: Record<string, unknown> = {};
      for (const [k, x] of Object.entries(v)) {
        const e = encode(x, seen);
        if (e !== undefined) out[k] = e;
      }
      return tag in out ? tagged('escaped', out) : out;
    } finally {
      seen.delete(v);
    }
  };

  const decodeEntries = (o: object): Record<string, unknown> =>
    Object.fromEntries(Object.entries(o).map(([k, x]) => [k, decode(x)]));

  const decode = (v: unknown): unknown => {
    if (v === null || typeof v !== 'object') return v;
    if (Array.isArray(v)) return v.map(decode);
    const o = v as Record<string, unknown>;
    if (typeof o[tag] === 'string' && 'v' in o && Object.keys(o).length === 2) {
      const t = o.v;
      switch (o[tag] as Kind) {
        case 'date':
          return new Date(typeof t === 'string' ? t : NaN);
        case 'bytes':
          return new Uint8Array(Buffer.from(String(t), 'base64'));
        case 'url':
          return new URL(String(t));
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
          return decodeEntries((t ?? {}) as object);
      }
    }
    return decodeEntries(o);
  };

  const toJson = (value: unknown): unknown => encode(value, new Set());
  return {
    toJson,
    toOrderedJson: (value) => {
      const encoded = toJson(value);
      return encoded !== null && typeof encoded === 'object'
        ? tagged('json', JSON.stringify(encoded))
        : encoded;
    },
    fromJson: <T>(json: unknown) => decode(json) as T,
  };
}
