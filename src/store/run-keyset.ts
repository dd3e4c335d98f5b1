import type { KeyedRun, RunCursorKey } from '../util/run-cursor';
import type { DurableNames } from './durable-names';

/**
 * A run's `created_at` as the text a list cursor carries (microseconds, UTC), selected as `created_key`
 * next to each listed run; src/util/run-cursor.ts encodes it and checks it when it comes back.
 */
export const CURSOR_KEY_SQL = `to_char(r.created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

/**
 * What a list walks, newest first, as `r` (the runs), with its keyset cursor and order, for the list
 * statements (the run API's and the inspector's): every run through `ai_runs_list_idx`; or, with tags
 * (`tags`: the parameter holding the filter's jsonb), the runs of ONE of its tags through `ai_run_tags`
 * (keyed (tag, created_at, run_id): a tenant's newest page is read, not its whole history, then sorted).
 * The statement still checks every tag on the run itself, written so that the planner cannot take the
 * GIN index for it instead (it underestimates a tenant's runs, then fetches and sorts all of them). `cursor`: the parameters of the cursor's
 * (created_at, id), null on the first page.
 */
export function listWalk(
  t: DurableNames,
  tags: string | null,
  cursor: [string, string],
): { from: string; where: string; order: string } {
  const [at, id] = cursor;
  const k = tags ? { at: 'g.created_at', id: 'g.run_id' } : { at: 'r.created_at', id: 'r.id' };
  return {
    from: tags ? `${t.runTags} g join ${t.runs} r on r.id = g.run_id` : `${t.runs} r`,
    where:
      (tags
        ? `g.tag = (select jsonb_build_object(e.key, e.value)::text from jsonb_each(${tags}::jsonb) e order by e.key limit 1)
   and coalesce(r.tags, '{}') @> ${tags}::jsonb and `
        : '') + `(${at}::timestamptz is null or (${k.at}, ${k.id}) < (${at}::timestamptz, ${id}::uuid))`,
    order: `${k.at} desc, ${k.id} desc`,
  };
}

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
