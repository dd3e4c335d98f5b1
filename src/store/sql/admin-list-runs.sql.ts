import { CURSOR_KEY_SQL } from '../run-keyset';

/**
 * The inspector's runs list: newest first with keyset pagination on (created_at, id), served by
 * ai_runs_list_idx, so page 1,000 costs what page 1 does. A summary only (no input/output): the list must
 * stay small whatever the runs carry. Command counts come from the partial index on unsettled commands.
 * $1 statuses, $2 kind, $3 created from, $4 created before, $5 dead-lettered, $6 has an in-doubt
 * command, $7/$8 cursor (created_at, id), $9 limit
 */
export const ADMIN_LIST_RUNS_SQL = `
select r.id, r.kind, r.status, r.cursor, r.epoch, r.worker_id, r.attempts, r.max_attempts, r.parked_reason,
       r.error ->> 'message' as error_message, r.available_at, r.created_at, r.updated_at, r.finished_at,
       ${CURSOR_KEY_SQL} as created_key,
       (select count(*) from ai_commands c where c.run_id = r.id and c.status = 'in_doubt')::int as in_doubt,
       (select count(*) from ai_commands c
         where c.run_id = r.id and c.status = 'awaiting_approval')::int as awaiting_approval
  from ai_runs r
 where ($1::text[] is null or r.status = any($1))
   and ($2::text is null or r.kind = $2)
   and ($3::timestamptz is null or r.created_at >= $3)
   and ($4::timestamptz is null or r.created_at < $4)
   and ($5::boolean is null or (r.status = 'dead_lettered') = $5)
   and ($6::boolean is null
        or exists (select 1 from ai_commands c where c.run_id = r.id and c.status = 'in_doubt') = $6)
   and ($7::timestamptz is null or (r.created_at, r.id) < ($7::timestamptz, $8::uuid))
 order by r.created_at desc, r.id desc
 limit $9`;
