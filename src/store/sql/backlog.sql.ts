/**
 * The health check's backlog: how many runs are due and how long the oldest has waited, by the database
 * clock. Same conditions as the claim query and read through its partial index (ai_runs_claim_idx), so a
 * probe every few seconds stays cheap however much terminal history the table holds.
 */
export const BACKLOG_SQL = `
select count(*)::int as depth,
       coalesce(extract(epoch from now() - min(available_at)) * 1000, 0)::float8 as oldest_due_ms
  from ai_runs
 where status in ('pending', 'waiting') and available_at <= now() and attempts < max_attempts`;
