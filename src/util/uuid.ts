import { InvalidArgumentError } from '../errors/invalid-argument.error';

/** The canonical text form of a UUID (any version), as PostgreSQL prints it; case-insensitive. */
export const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Whether `value` is a UUID in canonical form (what run ids are). */
export function isUuid(value: unknown): value is string {
  return typeof value === 'string' && UUID_PATTERN.test(value);
}

/** `value` if it is a UUID; otherwise InvalidArgumentError naming `field` (nothing reaches the database). */
export function requireUuid(value: unknown, field: string): string {
  if (isUuid(value)) return value;
  const shown = typeof value === 'string' ? JSON.stringify(value.slice(0, 60)) : typeof value;
  throw new InvalidArgumentError(field, `must be a UUID such as a run id (got ${shown})`);
}
