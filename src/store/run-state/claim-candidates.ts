import type { DurableNames } from '../durable-names';

/**
 * The due runs a claim may take, in claim order, locked SKIP LOCKED: the conditions of the partial
 * index ai_runs_claim_idx (`status in ('pending', 'waiting') and limited_by is null`: a run held back
 * by a concurrency limit has left it) and the claim's own. Both claim statements select through it.
 * $2 kinds, $3 limit, $5 run ids in flight in this process
 */
export function dueCandidates(t: DurableNames, columns: string): string {
  return `select ${columns} from ${t.runs}
   where status in ('pending', 'waiting')
     and limited_by is null
     and available_at <= now()
     and attempts < max_attempts
     and kind = any($2::text[])
     and id <> all($5::uuid[])
   order by priority desc, available_at
   limit $3
   for update skip locked`;
}
