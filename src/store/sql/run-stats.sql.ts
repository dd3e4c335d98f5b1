/**
 * The operator's numbers in one round trip, read at scrape or page time, never on the hot path: runs by
 * status (a full count: O(ai_runs), which is why metrics cache it for a few seconds), in-doubt commands
 * (served by the partial index ai_commands_unsettled_idx), and the due backlog, read through the claim
 * index ai_runs_claim_idx with the claim query's own conditions, so "due" means what a worker would claim.
 */
export const RUN_STATS_SQL = `
select (select coalesce(jsonb_object_agg(status, n), '{}'::jsonb)
          from (select status, count(*) as n from ai_runs group by status) s) as by_status,
       (select count(*) from ai_commands where status = 'in_doubt')::int as in_doubt,
       q.depth, q.oldest_due_ms
  from (select count(*)::int as depth,
               coalesce(extract(epoch from now() - min(available_at)) * 1000, 0)::float8 as oldest_due_ms
          from ai_runs
         where status in ('pending', 'waiting') and available_at <= now() and attempts < max_attempts) q`;
