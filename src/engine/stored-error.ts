import * as errors from '../errors';

/** The library's error classes by name: a stored error of one of them comes back as that class. */
const CLASSES = new Map<string, new (...args: never[]) => Error>(
  (Object.values(errors) as unknown[])
    .filter(
      (c): c is new (...args: never[]) => Error => typeof c === 'function' && c.prototype instanceof Error,
    )
    .map((c) => [c.name, c]),
);

/** Keys the stored form sets itself (or that would touch the prototype): never taken from `fields`. */
const RESERVED_KEYS = new Set(['name', 'message', 'stack', 'cause', 'retryable', '__proto__', 'constructor']);

/**
 * The error a workflow gets for a failed call, rebuilt from its stored form (`serializeError`): the
 * same on the first execution and on every replay. Its `name`, `message`, `code`, `stack`, `cause`
 * and a `retryable: false` flag are kept, and the primitive fields stored with it (`fields`: `status`,
 * `retryAfterMs`, …) come back as its own properties; an error of one of this library's classes comes
 * back as that class (`instanceof NonRetryableError` holds), any other as an `Error` with its `name`.
 */
export function errorFromStored(stored: unknown, depth = 0): Error {
  const s = (stored && typeof stored === 'object' ? stored : { message: String(stored) }) as Record<
    string,
    unknown
  >;
  const name = typeof s.name === 'string' ? s.name : 'Error';
  const Ctor = CLASSES.get(name) ?? Error;
  const e = Object.create(Ctor.prototype) as Error;
  const hidden = (key: string, value: unknown) =>
    Object.defineProperty(e, key, { value, writable: true, configurable: true, enumerable: false });
  hidden('message', typeof s.message === 'string' ? s.message : '');
  hidden('stack', typeof s.stack === 'string' ? s.stack : `${name}: ${String(s.message ?? '')}`);
  // Fields first, then what the stored form names itself: a field never overrides those.
  if (s.fields && typeof s.fields === 'object' && !Array.isArray(s.fields))
    for (const [key, value] of Object.entries(s.fields as Record<string, unknown>)) {
      if (RESERVED_KEYS.has(key) || (value !== null && typeof value === 'object')) continue;
      // defineProperty, not assignment: a stored `__proto__` key stays a plain field.
      Object.defineProperty(e, key, { value, writable: true, configurable: true, enumerable: true });
    }
  Object.assign(e, { name });
  if (typeof s.code === 'string') Object.assign(e, { code: s.code });
  if (s.retryable === false) Object.assign(e, { retryable: false });
  if (s.cause !== undefined && s.cause !== null && depth < 3)
    hidden('cause', errorFromStored(s.cause, depth + 1));
  return e;
}

/** The step index whose recorded failure an error handed to the workflow is (hidden property). */
const FAILURE_AT = Symbol('durable.failureAt');

/** Marks `err` as the failure of the step at `index`, as handed to the workflow. */
export function markStepFailure(err: Error, index: number): Error {
  Object.defineProperty(err, FAILURE_AT, { value: index, enumerable: false });
  return err;
}

/**
 * The step indexes whose failure `err` is, or wraps (its cause chain): a run that ends with one of
 * them did not get past that failure, which is then not recorded (the run's retry runs the step again).
 */
export function stepFailuresIn(err: unknown): Set<number> {
  const out = new Set<number>();
  for (let e = err, depth = 0; e && typeof e === 'object' && depth < 8; depth++) {
    const at = (e as { [FAILURE_AT]?: number })[FAILURE_AT];
    if (at !== undefined) out.add(at);
    e = (e as { cause?: unknown }).cause;
  }
  return out;
}
