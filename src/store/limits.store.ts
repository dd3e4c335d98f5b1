import { Injectable } from '@nestjs/common';
import { DurableDatabase } from './durable-database';
import type { SqlText } from './durable-names';
import { heldWhileWaiting, keyScope, kindScope, rateScope } from './run-state/slots';

/** The limits of one kind, as its workflow declares them (null: no such limit). */
export interface KindLimits {
  kind: string;
  kindCap: number | null;
  keyCap: number | null;
  rate: { limit: number; periodMs: number; perKey: boolean } | null;
  /** Its runs keep their slots while they wait (`holdSlotWhileWaiting`). */
  holdWhileWaiting: boolean;
}

/** DECLARE_LIMITS_SQL when no kind has a limit: their rows go, so nobody limits them any more. $1 kinds */
const DROP_LIMITS_SQL: SqlText = (t) => `delete from ${t.limits} where kind = any($1::text[])`;

/**
 * A worker declares the limits of a kind it runs, before its first claim: the caps (a kind without
 * any loses its row, so nobody limits it any more), the kind's slots up to its cap, every known key's
 * slots up to the key cap (keys of live runs and keys that had slots), and the rate tokens of the kind
 * (or of every known key, with a per-key rate). Slots and tokens above a lowered cap stay but are never
 * taken again. One statement for every kind the worker runs.
 * $1 kinds, $2 kind caps, $3 key caps, $4 rate limits, $5 rate periods ms, $6 rate per key (null: none),
 * $7 hold slots while waiting
 */
const DECLARE_LIMITS_SQL: SqlText = (t) => `
with d as (
  select * from unnest($1::text[], $2::int[], $3::int[], $4::int[], $5::int[], $6::boolean[], $7::boolean[])
    as d(kind, kind_cap, key_cap, rate_limit, rate_period_ms, rate_per_key, hold_waiting)
), gone as (
  delete from ${t.limits} l using d
   where l.kind = d.kind and d.kind_cap is null and d.key_cap is null and d.rate_limit is null
), l as (
  insert into ${t.limits} (kind, kind_cap, key_cap, rate_limit, rate_period_ms, rate_per_key, hold_waiting)
  select kind, kind_cap, key_cap, rate_limit, rate_period_ms, coalesce(rate_per_key, false), hold_waiting from d
   where kind_cap is not null or key_cap is not null or rate_limit is not null
  on conflict (kind) do update
     set kind_cap = excluded.kind_cap, key_cap = excluded.key_cap, rate_limit = excluded.rate_limit,
         rate_period_ms = excluded.rate_period_ms, rate_per_key = excluded.rate_per_key,
         hold_waiting = excluded.hold_waiting, updated_at = now()
  returning kind, kind_cap, key_cap, rate_limit, rate_per_key
), keys as (
  select distinct x.kind, x.concurrency_key as key from ${t.runs} x join l on l.kind = x.kind
   where x.concurrency_key is not null and x.status in ('pending', 'waiting', 'running')
), scopes as (
  select ${kindScope('l.kind')} as scope, l.kind, l.kind_cap as cap from l where l.kind_cap is not null
  union
  select ${keyScope('k.kind', 'k.key')}, l.kind, l.key_cap from l join keys k on k.kind = l.kind
   where l.key_cap is not null
  union
  select sl.scope, l.kind, l.key_cap from l join ${t.slots} sl on sl.kind = l.kind
   where l.key_cap is not null and sl.scope <> ${kindScope('l.kind')}
), slots as (
  insert into ${t.slots} (scope, n, kind)
  select s.scope, g, s.kind from scopes s cross join generate_series(1, s.cap) g
  on conflict do nothing
), rates as (
  select ${rateScope('l.kind')} as scope, l.kind, l.rate_limit as cap from l
   where l.rate_limit is not null and not l.rate_per_key
  union
  select ${rateScope('k.kind', 'k.key')}, l.kind, l.rate_limit from l join keys k on k.kind = l.kind
   where l.rate_limit is not null and l.rate_per_key
  union
  select tk.scope, l.kind, l.rate_limit from l join ${t.rateTokens} tk on tk.kind = l.kind
   where l.rate_limit is not null and l.rate_per_key and tk.scope <> ${rateScope('l.kind')}
)
insert into ${t.rateTokens} (scope, n, kind)
select r.scope, g, r.kind from rates r cross join generate_series(1, r.cap) g
on conflict do nothing`;

/**
 * The reconciler's safety net for held-back runs, in one statement: every scope that holds runs back
 * gets its missing slots (a key whose first run was started before its kind's limits were declared),
 * slots still owned by a run that left `running` more than a minute ago without freeing them are
 * freed (none should be: every such statement frees them; a waiting run of a kind that holds its
 * slots while waiting owns them rightly), and as many held runs as each scope has
 * free slots go back into the claim index, all of them when their kind no longer has that limit. It
 * repairs the rare race in which a claim held a run back on a slot freed by a statement that could
 * not yet see it. A run held back by a rate limit is woken here only (a token frees by time, not by a
 * statement): as many as the scope has tokens free by now. $1 wake channel
 */
const WAKE_HELD_SQL: SqlText = (t) => `
with scopes as (
  select distinct h.limited_by as scope, h.kind from ${t.runs} h
   where h.limited_by is not null and h.status in ('pending', 'waiting')
), caps as (
  select s.scope, s.kind, jsonb_typeof(s.scope::jsonb) = 'object' as rate,
         case when jsonb_typeof(s.scope::jsonb) = 'object' then l.rate_limit
              when jsonb_array_length(s.scope::jsonb) = 1 then l.kind_cap else l.key_cap end as cap
    from scopes s left join ${t.limits} l on l.kind = s.kind
), made as (
  insert into ${t.slots} (scope, n, kind)
  select c.scope, g, c.kind from caps c cross join generate_series(1, coalesce(c.cap, 0)) g where not c.rate
  on conflict do nothing
  returning scope
), made_tokens as (
  insert into ${t.rateTokens} (scope, n, kind)
  select c.scope, g, c.kind from caps c cross join generate_series(1, coalesce(c.cap, 0)) g where c.rate
  on conflict do nothing
  returning scope
), leaked as (
  update ${t.slots} sl set run_id = null, epoch = null, taken_at = null
   where sl.run_id is not null and sl.taken_at < now() - interval '1 minute'
     and not exists (select 1 from ${t.runs} x where x.id = sl.run_id and x.epoch = sl.epoch
                        and (x.status = 'running' or (x.status = 'waiting' and ${heldWhileWaiting(t)})))
  returning sl.scope
), room as (
  select c.scope, c.cap,
         case when c.rate
              then (select count(*) from ${t.rateTokens} tk where tk.scope = c.scope and tk.n <= c.cap and tk.free_at <= now())
                   + (select count(*) from made_tokens m where m.scope = c.scope)
              else (select count(*) from ${t.slots} sl where sl.scope = c.scope and sl.n <= c.cap and sl.run_id is null)
                   + (select count(*) from made m where m.scope = c.scope)
                   + (select count(*) from leaked k where k.scope = c.scope) end as k
    from caps c
), woken as (
  update ${t.runs} w set limited_by = null, updated_at = now()
    from room
   cross join lateral (
     select x.id from ${t.runs} x
      where x.limited_by = room.scope and x.status in ('pending', 'waiting')
      order by x.priority desc, x.available_at
      limit case when room.cap is null then null else room.k end
      for update of x skip locked) h
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
    // No kind with a limit (the usual worker): the statement's one effect, on one table. A boot plans
    // it on a fresh connection, where the whole statement costs ~15 ms of the server's catalog reads.
    if (limits.every((l) => l.kindCap === null && l.keyCap === null && !l.rate)) {
      await this.db.query(DROP_LIMITS_SQL, [limits.map((l) => l.kind)]);
      return;
    }
    await this.db.query(DECLARE_LIMITS_SQL, [
      limits.map((l) => l.kind),
      limits.map((l) => l.kindCap),
      limits.map((l) => l.keyCap),
      limits.map((l) => l.rate?.limit ?? null),
      limits.map((l) => l.rate?.periodMs ?? null),
      limits.map((l) => l.rate?.perKey ?? null),
      limits.map((l) => l.holdWhileWaiting),
    ]);
  }

  /** Wakes runs held back on a scope that has room (see WAKE_HELD_SQL). */
  async wakeHeld(): Promise<{ woken: number; leaked: number }> {
    const { rows } = await this.db.query(WAKE_HELD_SQL, [this.db.names.wakeChannel]);
    return { woken: rows[0].woken, leaked: rows[0].leaked };
  }
}
