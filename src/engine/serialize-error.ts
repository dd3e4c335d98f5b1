import { storableJson } from '../util/json';

/**
 * Error as stored in the run row: name, code, message, stack and cause chain. Always storable: text
 * PostgreSQL refuses (NUL, lone surrogates) becomes U+FFFD, so recording a failure never fails.
 */
export function serializeError(err: unknown): Record<string, unknown> {
  return storableJson(plainError(err, 0)) as Record<string, unknown>;
}

function plainError(err: unknown, depth: number): Record<string, unknown> {
  if (!(err instanceof Error)) return { message: String(err) };
  const e = err as Error & { code?: unknown; retryable?: unknown };
  return {
    name: e.name,
    code: typeof e.code === 'string' ? e.code : undefined,
    retryable: e.retryable === false ? false : undefined,
    message: e.message,
    stack: e.stack,
    cause: e.cause !== undefined && depth < 3 ? plainError(e.cause, depth + 1) : undefined,
  };
}
