import type { DurableNames } from '../durable-names';

/**
 * The scope of a kind's limit (`["triage"]`) and of a key's (`["triage", "tenant-a"]`), as SQL
 * expressions: a JSON array as text, so no kind or key can make two scopes meet.
 */
export const kindScope = (kind: string): string => `jsonb_build_array(${kind})::text`;
export const keyScope = (kind: string, key: string): string => `jsonb_build_array(${kind}, ${key})::text`;
/** The scope of a kind's rate limit (`{"rate": ["triage"]}`), or of one key's (`{"rate": ["triage", "acme"]}`). */
export const rateScope = (kind: string, key?: string): string =>
  `jsonb_build_object('rate', jsonb_build_array(${kind}${key ? `, ${key}` : ''}))::text`;

/**
 * Two CTEs, `slot_free` and `slot_wake`, for a statement that takes runs out of `running`: the
 * concurrency slots held by the runs of `from` (a FROM item with their `id` and the `epoch` they held
 * them at) are freed, and for every slot freed the first run held back on its scope
 * (ai_runs_limited_idx, in claim order) goes back into the claim index, with a NOTIFY that wakes idle
 * workers. A run without slots costs one probe of ai_slots_run_idx. A held run another statement is
 * waking right now is skipped (SKIP LOCKED: no wait, and no two statements locking held runs in
 * opposite orders); what a skip leaves held, the reconciler's sweep wakes. `keep`: a condition on the
 * slot `sl` under which it stays with its run (a park of a kind that holds its slots while waiting).
 * @internal
 */
export function releaseSlots(t: DurableNames, from: string, keep?: string): string {
  return `slot_free as (
  update ${t.slots} sl set run_id = null, epoch = null, taken_at = null
    from ${from} f
   where sl.run_id = f.id and sl.epoch = f.epoch${keep ? ` and not (${keep})` : ''}
  returning sl.scope
), slot_wake as (
  update ${t.runs} w set limited_by = null, updated_at = now()
    from (select fs.scope, count(*) as k from slot_free fs group by fs.scope) f
   cross join lateral (
     select x.id from ${t.runs} x
      where x.limited_by = f.scope and x.status in ('pending', 'waiting')
      order by x.priority desc, x.available_at
      limit f.k
      for update of x skip locked) h
   where w.id = h.id
  returning w.id, pg_notify('${t.wakeChannel}', w.kind)
)`;
}

/**
 * Two CTEs, `key_slots` and `key_tokens`, for a statement that inserts runs (CTE `from`, its new rows):
 * a run with a concurrency key of a kind with a per-key limit gets its key's slots and rate tokens when
 * they are missing (`ai_limits` says how many). A run without a key costs nothing.
 * @internal
 */
export function keyLimitRows(t: DurableNames, from: string): string {
  return `key_slots as (
  insert into ${t.slots} (scope, n, kind)
  select ${keyScope(`${from}.kind`, `${from}.concurrency_key`)}, g, ${from}.kind
    from ${from} join ${t.limits} l on l.kind = ${from}.kind cross join generate_series(1, l.key_cap) g
   where ${from}.concurrency_key is not null
  on conflict do nothing
), key_tokens as (
  insert into ${t.rateTokens} (scope, n, kind)
  select ${rateScope(`${from}.kind`, `${from}.concurrency_key`)}, g, ${from}.kind
    from ${from} join ${t.limits} l on l.kind = ${from}.kind and l.rate_per_key
   cross join generate_series(1, l.rate_limit) g
   where ${from}.concurrency_key is not null
  on conflict do nothing
)`;
}

/**
 * The `keep` of a park (`releaseSlots`): the slot's kind holds its slots while its runs wait
 * (`holdSlotWhileWaiting`). The next claim of the run takes them back at its new epoch.
 * @internal
 */
export const heldWhileWaiting = (t: DurableNames): string =>
  `exists (select 1 from ${t.limits} hl where hl.kind = sl.kind and hl.hold_waiting)`;
