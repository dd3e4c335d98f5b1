import { storableJson } from '../util/json';

/** What `serializeError` keeps beside name, code, message, stack and cause. */
export interface SerializeErrorOptions {
  /**
   * Keep the error's own primitive fields (`status`, `retryAfterMs`, …) as `fields`, by the rules of
   * `errorFields`: for a step failure, whose stored form the workflow gets. Default false.
   */
  fields?: boolean;
}

/**
 * Error as stored in the run row: name, code, message, stack and cause chain (and, with `fields`, the
 * error's own primitive fields). Always storable: text PostgreSQL refuses (NUL, lone surrogates)
 * becomes U+FFFD, so recording a failure never fails.
 */
export function serializeError(err: unknown, options: SerializeErrorOptions = {}): Record<string, unknown> {
  return storableJson(plainError(err, 0, options.fields === true)) as Record<string, unknown>;
}

function plainError(err: unknown, depth: number, withFields: boolean): Record<string, unknown> {
  if (!(err instanceof Error)) return { message: String(err) };
  const e = err as Error & { code?: unknown; retryable?: unknown };
  return {
    name: e.name,
    code: typeof e.code === 'string' ? e.code : undefined,
    retryable: e.retryable === false ? false : undefined,
    message: e.message,
    stack: e.stack,
    cause: e.cause !== undefined && depth < 3 ? plainError(e.cause, depth + 1, withFields) : undefined,
    fields: withFields ? errorFields(e) : undefined,
  };
}

/** At most this many fields of an error are kept (the first ones, in the error's own key order). */
export const MAX_ERROR_FIELDS = 16;
/** A string field longer than this is cut to it. */
export const MAX_ERROR_FIELD_CHARS = 1000;
/** A key longer than this is dropped. */
const MAX_ERROR_FIELD_KEY_CHARS = 100;

/** Kept elsewhere in the stored form (`code` when it is a string), or never a field. */
const RESERVED = new Set(['name', 'message', 'stack', 'cause', 'retryable', 'fields', '__proto__']);

/**
 * A key naming what may hold credentials or a whole request: dropped whatever its value (case-insensitive,
 * anywhere in the key), and so is a URL (`url`, `baseURL`, `uri`: a query string may carry a key).
 * `requestId`, `request_id`, `responseId` (a provider's id of the call) are kept.
 */
const SECRET_KEY =
  /authorization|headers|config|request|response|cookie|password|passwd|secret|token|api_?key|api-key|credential|ur[il]$/i;
const ID_KEY = /^(?:request|response)[_-]?id$/i;

/**
 * The error's own enumerable fields that a workflow may branch on (`status: 429`, `retryAfterMs`):
 * strings (cut to MAX_ERROR_FIELD_CHARS), finite numbers, booleans and null; at most MAX_ERROR_FIELDS
 * of them. Objects (an axios error's `config`, `request`, `response`), functions, symbols and
 * bigints are dropped, and so is every key SECRET_KEY names. Undefined when none is left.
 */
export function errorFields(err: Error): Record<string, unknown> | undefined {
  const out: Record<string, unknown> = {};
  let n = 0;
  let keys: string[];
  try {
    keys = Object.keys(err);
  } catch {
    return undefined; // a Proxy that refuses: no fields
  }
  for (const key of keys) {
    if (n >= MAX_ERROR_FIELDS) break;
    if (RESERVED.has(key) || key.length > MAX_ERROR_FIELD_KEY_CHARS) continue;
    if (SECRET_KEY.test(key) && !ID_KEY.test(key)) continue;
    let v: unknown;
    try {
      v = (err as unknown as Record<string, unknown>)[key];
    } catch {
      continue; // a getter that throws
    }
    if (key === 'code' && typeof v === 'string') continue; // stored as `code`
    if (typeof v === 'string') v = v.length > MAX_ERROR_FIELD_CHARS ? v.slice(0, MAX_ERROR_FIELD_CHARS) : v;
    else if (typeof v === 'number') {
      if (!Number.isFinite(v)) continue;
    } else if (typeof v !== 'boolean' && v !== null) continue;
    out[key] = v;
    n++;
  }
  return n > 0 ? out : undefined;
}
