/** Error as stored in the run row: name, code, message, stack and cause chain. */
export function serializeError(err: unknown, depth = 0): Record<string, unknown> {
  if (!(err instanceof Error)) return { message: String(err) };
  const e = err as Error & { code?: unknown };
  return {
    name: e.name,
    code: typeof e.code === 'string' ? e.code : undefined,
    message: e.message,
    stack: e.stack,
    cause: e.cause !== undefined && depth < 3 ? serializeError(e.cause, depth + 1) : undefined,
  };
}
