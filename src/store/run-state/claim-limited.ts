import type { SqlText } from '../durable-names';
import { keyScope, kindScope, rateScope } from './slots';
import { CLAIM_TIMELINE, CLAIMED_COLUMNS, dueCandidates, PIN_VERSION, TAKEN_OVER } from './claim-candidates';
import { CLAIM_FETCH, CLAIM_LIMIT, OFFER_COLUMNS, offerLock, offerUpdate } from './handoff-offer';

/**
 * The claim of a worker that runs a kind with a concurrency limit (CLAIM_RUNS_SQL otherwise): the same
 * due runs in the same order, SKIP LOCKED, and in the same statement every run takes one free slot of
 * each scope it needs (its kind's when the kind has a `concurrency`, its key's when it has a
 * `perKeyConcurrency` and the run a key), also SKIP LOCKED. A run that gets all of them is claimed,
 * its slots owned by (run, new epoch); a run that cannot is held back: `limited_by` names the scope
 * that was full, it leaves the claim index, and a `run.limited` event says so; the statement that
 * frees a slot of that scope wakes it (`releaseSlots`). Slots are granted key first, then kind, in
 * claim order; a slot is free only when its row says so (`run_id is null`), which a concurrent take
 * re-checks on the newest row version, so two claims never share one. Slots above today's cap (it
 * was lowered) are never taken. Only as many free slots are locked as the runs found need: a lock is a
 * write to the row. A run's first claim (epoch 0) of a kind with a rate limit also takes a rate token
 * free by now (`ai_rate_tokens`), granted after the slots, and sets it a period ahead; a run that gets
 * none is held back on the rate scope and woken by the sweep once a token is free again. A run that
 * still owns slots (its park kept them: `holdSlotWhileWaiting`) needs no new one of their scopes and
 * takes them back at its new epoch (`retake`).
 * Planned once per connection (issue 47): PostgreSQL's plan cache plans a statement for its parameters'
 * values (a custom plan, 1-3 ms for this one) as long as that looks cheaper than its generic plan, which
 * it did whenever the statistics showed many due-looking runs (a backlog, or runs held back by a full
 * limit: the generic plan reckons with a tenth of them). So the due runs reach the rest through an
 * array (every plan reckons with a handful) and read their parameters through scalar subqueries
 * (`dueCandidates(..., true)`): a custom plan then costs what the generic one does, plus its planning,
 * and the generic plan is kept. `plan_cache_mode` would do it too, but it is a session setting, which
 * would leak to the app's statements on a shared DataSource or through PgBouncer.
 * Withdraws and offers the worker's hand-off slots as CLAIM_RUNS_SQL does (handoff-offer.ts).
 * $1 worker id, $2 kinds, $3 limit, $4 lease ttl ms, $5 run ids in flight in this process,
 * $6, $7 the (kind, version) pairs the worker registers (null: any version), $8, $9, $10 the hand-off's
 */
export const CLAIM_LIMITED_SQL: SqlText = (t) => `
with ${offerLock(t)}, c as (
  -- The due runs, locked SKIP LOCKED, passed through an array and limited again (they are CLAIM_FETCH at
  -- most already): every plan reckons with about one run, as a claim takes, whatever the statistics of
  -- ai_runs say (an array of unknown length counts as ten elements, a limit of unknown size as a tenth).
  select * from unnest(array(${dueCandidates(t, '(id, kind, concurrency_key, priority, available_at, epoch)', true, CLAIM_FETCH)}))
    as c(id uuid, kind text, concurrency_key text, priority int, available_at timestamptz, epoch bigint)
   limit (select ${CLAIM_LIMIT})
), need as (
  -- Level 1: the key's slot; 2: the kind's slot; 3: a rate token, only for a run's first claim.
  select c.id, c.priority, c.available_at, s.level, s.scope, s.cap, l.rate_period_ms as period
    from c join ${t.limits} l on l.kind = c.kind
   cross join lateral (values
     (1, case when c.concurrency_key is not null then ${keyScope('c.kind', 'c.concurrency_key')} end, l.key_cap),
     (2, ${kindScope('c.kind')}, l.kind_cap),
     (3, case when c.epoch > 0 then null
              when not l.rate_per_key then ${rateScope('c.kind')}
              when c.concurrency_key is not null then ${rateScope('c.kind', 'c.concurrency_key')} end,
      l.rate_limit)) s(level, scope, cap)
   where s.scope is not null and s.cap is not null
     -- A run of a kind that holds its slots while waiting still owns them: it takes them back (retake).
     -- Only a run claimed before can (epoch above 0): a first claim skips the look (it cost a claim of
     -- a limited kind 0.8 ms on the bench's churned ai_slots).
     and (c.epoch = 0 or not exists (select 1 from ${t.slots} own where own.run_id = c.id and own.scope = s.scope))
), free as (
  -- At most as many free slots of a scope as runs here need (ai_slots_free_idx), locked SKIP LOCKED.
  select f.scope, f.n
    from (select scope, count(*) as want, max(cap) as cap from need where level < 3 group by scope) w
   cross join lateral (
     select sl.scope, sl.n from ${t.slots} sl
      where sl.scope = w.scope and sl.run_id is null and sl.n <= w.cap
      order by sl.n
      limit w.want
      for update of sl skip locked) f
), tokens as (
  -- As many rate tokens free by now as runs here begin (ai_rate_tokens_free_idx), SKIP LOCKED.
  select f.scope, f.n
    from (select scope, count(*) as want, max(cap) as cap from need where level = 3 group by scope) w
   cross join lateral (
     select tk.scope, tk.n from ${t.rateTokens} tk
      where tk.scope = w.scope and tk.free_at <= now() and tk.n <= w.cap
      order by tk.free_at
      limit w.want
      for update of tk skip locked) f
), room as (
  select scope, count(*) as k from (select scope from free union all select scope from tokens) x group by scope
), key_ranked as (
  select id, scope, row_number() over (partition by scope order by priority desc, available_at, id) as rn
    from need where level = 1
), key_full as (
  select kr.id, kr.scope from key_ranked kr left join room on room.scope = kr.scope
   where kr.rn > coalesce(room.k, 0)
), kind_ranked as (
  select id, scope, row_number() over (partition by scope order by priority desc, available_at, id) as rn
    from need where level = 2 and id not in (select id from key_full)
), kind_full as (
  select kr.id, kr.scope from kind_ranked kr left join room on room.scope = kr.scope
   where kr.rn > coalesce(room.k, 0)
), rate_ranked as (
  select id, scope, row_number() over (partition by scope order by priority desc, available_at, id) as rn
    from need where level = 3 and id not in (select id from key_full union all select id from kind_full)
), denied as (
  select id, scope from key_full
  union all
  select id, scope from kind_full
  union all
  select rr.id, rr.scope from rate_ranked rr left join room on room.scope = rr.scope
   where rr.rn > coalesce(room.k, 0)
), r as (
  update ${t.runs} r
     set status = 'running', worker_id = $1, epoch = r.epoch + 1, attempts = r.attempts + 1,
         lease_expires_at = now() + $4 * interval '1 millisecond', updated_at = now(),
         ${PIN_VERSION}, ${CLAIM_TIMELINE}
    from c
   where r.id = c.id and c.id not in (select id from denied)
  returning ${CLAIMED_COLUMNS}, ${TAKEN_OVER(t)}
), held as (
  update ${t.runs} r set limited_by = d.scope, updated_at = now()
    from denied d
   where r.id = d.id
  returning r.id, r.epoch, d.scope
), granted as (
  select n.id, n.scope, n.level, n.period,
         row_number() over (partition by n.scope order by n.priority desc, n.available_at, n.id) as rn
    from need n where n.id not in (select id from denied)
), take as (
  update ${t.slots} sl set run_id = r.id, epoch = r.epoch, taken_at = now()
    from (select scope, n, row_number() over (partition by scope order by n) as rn from free) f
    join granted g on g.scope = f.scope and g.rn = f.rn and g.level < 3
    join r on r.id = g.id
   where sl.scope = f.scope and sl.n = f.n
  returning sl.run_id, sl.scope, sl.n
), retake as (
  -- Slots a park kept (holdSlotWhileWaiting) pass to the run's new epoch; the park's epoch is older,
  -- so no slot taken above (free in this snapshot) is one of them. Only a run claimed before (its new
  -- epoch above 1) can own any.
  update ${t.slots} sl set epoch = r.epoch, taken_at = now()
    from r
   where sl.run_id = r.id and r.epoch > 1
  returning sl.run_id, sl.scope, sl.n
), spend as (
  -- A token is free again a period after the claim that begins a run took it.
  update ${t.rateTokens} tk set free_at = now() + g.period * interval '1 millisecond'
    from (select scope, n, row_number() over (partition by scope order by n) as rn from tokens) f
    join granted g on g.scope = f.scope and g.rn = f.rn and g.level = 3
    join r on r.id = g.id
   where tk.scope = f.scope and tk.n = f.n
  returning r.id as run_id, tk.scope, tk.n
), ev as (
  insert into ${t.events} (run_id, event_type, epoch, payload)
  select id, 'run.claimed', epoch,
         jsonb_build_object('workerId', $1::text, 'attempt', attempts, 'timeline', timeline)
         || coalesce((select jsonb_build_object('slots', jsonb_agg(jsonb_build_array(tk.scope::jsonb, tk.n) order by tk.scope))
                        from (select * from take union all select * from retake) tk
                       where tk.run_id = r.id), '{}'::jsonb)
         || coalesce((select jsonb_build_object('rateToken', jsonb_build_array(sp.scope::jsonb, sp.n))
                        from spend sp where sp.run_id = r.id), '{}'::jsonb)
    from r
  union all
  select id, 'run.limited', epoch, jsonb_build_object('scope', scope::jsonb) from held
), ${offerUpdate(t, 'select count(*) from c')}
select r.*, h.held_back, h.offered, h.handed
  from (select (select count(*)::int from held) as held_back, ${OFFER_COLUMNS}) h left join r on true`;
