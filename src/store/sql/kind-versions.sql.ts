import type { SqlText } from '../durable-names';
import { pinnedVersion } from './pinned-version.sql';

/**
 * For each (kind, version): its unfinished runs by status (a run claimed before versions existed counts
 * as version 1; one not pinned yet has version null), those held on non-determinism, and the live
 * workers that register it (a presence row without versions, of a worker from before them: version 1 of
 * each kind it lists). Never on a run's path. $1 kind (null: every kind)
 */
export const KIND_VERSIONS_SQL: SqlText = (t) => `
with runs as (
  select kind, ${pinnedVersion()} as version,
         count(*) filter (where status = 'pending')::int as pending,
         count(*) filter (where status = 'waiting')::int as waiting,
         count(*) filter (where status = 'running')::int as running,
         count(*) filter (where status = 'waiting' and available_at = 'infinity'
                            and error->>'code' = 'DURABLE_NON_DETERMINISM')::int as held
    from ${t.runs}
   where status in ('pending', 'waiting', 'running') and ($1::text is null or kind = $1)
   group by 1, 2
), served as (
  select e.key as kind, v.value::int as version, count(*)::int as workers
    from ${t.workers} w
   cross join lateral jsonb_each(case when w.versions = '{}'::jsonb
                                      then (select jsonb_object_agg(k, '[1]'::jsonb) from unnest(w.kinds) k)
                                      else w.versions end) e
   cross join lateral jsonb_array_elements_text(e.value) v
   where w.expires_at > now() and ($1::text is null or e.key = $1)
   group by 1, 2
)
select coalesce(r.kind, s.kind) as kind, coalesce(r.version, s.version) as version,
       coalesce(r.pending, 0) as pending, coalesce(r.waiting, 0) as waiting,
       coalesce(r.running, 0) as running, coalesce(r.held, 0) as held, coalesce(s.workers, 0) as workers
  from runs r full join served s on s.kind = r.kind and s.version = r.version
 order by 1, 2 desc nulls first`;
