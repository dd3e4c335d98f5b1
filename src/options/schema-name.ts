/** The schema of the module's tables when none is given. Its names stay unqualified, as before the option. */
export const DEFAULT_SCHEMA = 'public';

/**
 * What a schema name must be. Lowercase only, so the name means the same quoted or not (psql, a DBA's
 * `create schema durable`); at most 63 bytes, PostgreSQL's limit; `pg_` is reserved for system schemas.
 */
export const SCHEMA_NAME_RULE =
  'a plain PostgreSQL identifier: lowercase letters, digits and _, starting with a letter or _, at most 63 characters, not starting with pg_, not information_schema';

const PLAIN_IDENTIFIER = /^[a-z_][a-z0-9_]{0,62}$/;

/** Why `value` is not a usable schema name, or undefined when it is one. */
export function schemaNameProblem(value: unknown): string | undefined {
  if (
    typeof value === 'string' &&
    PLAIN_IDENTIFIER.test(value) &&
    !value.startsWith('pg_') &&
    value !== 'information_schema' // a system schema, like pg_*
  )
    return undefined;
  const got = typeof value === 'string' ? `'${value}'` : typeof value;
  return `must be ${SCHEMA_NAME_RULE}; got ${got}`;
}
