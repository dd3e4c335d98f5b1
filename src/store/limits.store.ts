import { Injectable } from '@nestjs/common';
import { DurableDatabase } from './durable-database';
import type { SqlText } from './durable-names';
import { keyScope, kindScope } from './run-state/slots';

/** The concurrency limits of one kind, as its workflow declares them (null: no such limit). */
export interface KindLimits {
  kind: string;
  kindCap: number | null;
  keyCap: number | null;
}

/**
 * A worker declares the limits of a kind it runs, before its first claim: the caps (a kind without
 * any loses its row, so nobody limits it any more), the kind's slots up to its cap, and every known
 * key's slots up to the key cap (keys of live runs and keys that had slots). Slots above a lowered cap
 * stay but are never taken again. One statement for every kind the worker runs.
 * $1 kinds, $2 their kind caps, $3 their key caps (null: none)
 */
const DECLARE_LIMITS_SQL: SqlText = (t) => `
with d as (
  select * from unnest($1::text[], $2::int[], $3::int[]) as d(kind, kind_cap, key_cap)
), gone as (
  delete from ${t.limits} l using d where l.kind = d.kind and d.kind_cap is null and d.key_cap is null
), l as (
  insert into ${t.limits} (kind, kind_cap, key_cap)
  select kind, kind_cap, key_cap from d where kind_cap is not null or key_cap is not null
  on conflict (kind) do update set kind_cap = excluded.kind_cap, key_cap = excluded.key_cap, updated_at = now()
  returning kind, kind_cap, key_cap
), scopes as (
  select ${kindScope('l.kind')} as scope, l.kind, l.kind_cap as cap from l where l.kind_cap is not null
  union
  select ${keyScope('l.kind', 'x.concurrency_key')}, l.kind, l.key_cap from l
    join ${t.runs} x on x.kind = l.kind and x.concurrency_key is not null
                    and x.status in ('pending', 'waiting', 'running')
   where l.key_cap is not null
  union
  select sl.scope, l.kind, l.key_cap from l join ${t.slots} sl on sl.kind = l.kind
   where l.key_cap is not null and sl.scope <> ${kindScope('l.kind')}
)
insert into ${t.slots} (scope, n, kind)
select s.scope, g, s.kind from scopes s cross join generate_series(1, s.cap) g
on conflict do nothing`;

/**
 * The reconciler's safety net for held-back runs, in one statement: every scope that holds runs back
 * gets its missing slots (a key whose first run was started before its kind's limits were declared),
 * slots still owned by a run that left `running` more than a minute ago without freeing them are
 * freed (none should be: every such statement frees them), and as many held runs as each scope has
 * free slots go back into the claim index, all of them when their kind no longer has that limit. It
 * repairs the rare race in which a claim held a run back on a slot freed by a statement that could
 * not yet see it. $1 wake channel
 */
const WAKE_HELD_SQL: SqlText = (t) => `
with scopes as (
  select distinct h.limited_by as scope, h.kind from ${t.runs} h
   where h.limited_by is not null and h.status in ('pending', 'waiting')
), caps as (
  select s.scope, s.kind,
         case when jsonb_array_length(s.scope::jsonb) = 1 then l.kind_cap else l.key_cap end as cap
    from scopes s left join ${t.limits} l on l.kind = s.kind
), made as (
  insert into ${t.slots} (scope, n, kind)
  select c.scope, g, c.kind from caps c cross join generate_series(1, coalesce(c.cap, 0)) g
  on conflict do nothing
  returning scope
), leaked as (
  update ${t.slots} sl set run_id = null, epoch = null, taken_at = null
   where sl.run_id is not null and sl.taken_at < now() - interval '1 minute'
     and not exists (select 1 from ${t.runs} x where x.id = sl.run_id and x.epoch = sl.epoch and x.status = 'running')
  returning sl.scope
), room as (
  select c.scope, c.cap,
         (select count(*) from ${t.slots} sl where sl.scope = c.scope and sl.n <= c.cap and sl.run_id is null)
         + (select count(*) from made m where m.scope = c.scope)
         + (select count(*) from leaked k where k.scope = c.scope) as k
    from caps c
), woken as (
  update ${t.runs} w set limited_by = null, updated_at = now()
    from room
   cross join lateral (
     select x.id from ${t.runs} x
      where x.limited_by = room.scope and x.status in ('pending', 'waiting')
      order by x.priority desc, x.available_at
      limit case when room.cap is null then null else room.k end) h
   where w.id = h.id
  returning w.kind, pg_notify($1, w.kind)
)
select (select count(*) from woken)::int as woken, (select count(*) from leaked)::int as leaked`;

/** Concurrency limits and their slots (`ai_limits`, `ai_slots`), off the run path. @internal */
@Injectable()
export class LimitsStore {
  constructor(private readonly db: DurableDatabase) {}

  /** Declares the limits of each kind a worker runs (see DECLARE_LIMITS_SQL). */
  async declare(limits: KindLimits[]): Promise<void> {
    if (!limits.length) return;
    await this.db.query(DECLARE_LIMITS_SQL, [
      limits.map((l) => l.kind),
      limits.map((l) => l.kindCap),
      limits.map((l) => l.keyCap),
    ]);
  }

  /** Wakes runs held back on a scope that has room (see WAKE_HELD_SQL). */
  async wakeHeld(): Promise<{ woken: number; leaked: number }> {
    const { rows } = await this.db.query(WAKE_HELD_SQL, [this.db.names.wakeChannel]);
    return { woken: rows[0].woken, leaked: rows[0].leaked };
  }
}
