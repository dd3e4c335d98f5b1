import type { KeyedRun, RunCursorKey } from '../util/run-cursor';

/**
 * A run's `created_at` as the text a list cursor carries (microseconds, UTC), selected as `created_key`
 * next to each listed run; src/util/run-cursor.ts encodes it and checks it when it comes back.
 */
export const CURSOR_KEY_SQL = `to_char(created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

/** A cursor key as a list statement binds it: (created_at, id), both null on the first page. */
export function cursorValues(after: RunCursorKey | null): [string | null, string | null] {
  return [after?.[0] ?? null, after?.[1] ?? null];
}

/** Rows of a list statement that selects `created_key` and `id`, mapped by `item`, with their keys. */
export function keyedRuns<T>(
  rows: Record<string, any>[],
  item: (row: Record<string, any>) => T,
): KeyedRun<T>[] {
  return rows.map((r) => ({ item: item(r), createdKey: r.created_key, id: r.id }));
}
