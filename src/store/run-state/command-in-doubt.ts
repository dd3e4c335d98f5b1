import { eventPayload } from '../event-payload';
import { extendLeaseBy, Fence, fencedRun, runFenced, StoreContext } from './fence';
import type { SqlText } from '../durable-names';

/**
 * A dispatch ended with an error that does not say whether the target acted (a 504, a timeout, a
 * reset): the command row goes from `pending` to `in_doubt` with that error, fenced, in one statement
 * with its event, before the workflow may learn anything of the call. Its policy settles it then.
 * $1 id, $2 worker, $3 epoch, $4 ttl ms, $5 key, $6 error, $7 event payload
 */
export const COMMAND_IN_DOUBT_SQL: SqlText = (t) => `
${fencedRun(t, `${extendLeaseBy('$4')}, updated_at = now()`)}, cmd as (
  update ${t.commands} c set status = 'in_doubt', error = $6::jsonb, updated_at = now()
    from run
   where c.idempotency_key = $5 and c.run_id = run.id and c.status = 'pending'
  returning c.idempotency_key
), ev as (
  insert into ${t.events} (run_id, event_type, epoch, payload)
  select run.id, 'tool.command_in_doubt', run.epoch, $7::jsonb from run
)
select cancel_requested, (select count(*) from cmd)::int as marked from run`;

/** Marks a dispatched command in doubt with the error its call ended with (fenced). */
export async function markCommandInDoubt(
  s: StoreContext,
  f: Fence,
  w: { key: string; name: string; index: number; error: Record<string, unknown> },
): Promise<{ cancelRequested: boolean; marked: boolean }> {
  const payload = { key: w.key, name: w.name, step: w.index, error: String(w.error.message ?? '') };
  const row = await runFenced<{ cancel_requested: boolean; marked: number }>(
    s,
    f,
    `in-doubt mark of command ${w.key}`,
    COMMAND_IN_DOUBT_SQL,
    [
      s.options.worker.leaseTtlMs,
      w.key,
      JSON.stringify(w.error),
      eventPayload(s.options, 'tool.command_in_doubt', payload),
    ],
    'dx_command_in_doubt',
  );
  return { cancelRequested: row.cancel_requested, marked: row.marked > 0 };
}
