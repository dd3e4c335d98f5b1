import { eventPayload } from '../event-payload';
import type { SqlText } from '../durable-names';
import { Fence, fencedRun, runFenced, StoreContext } from './fence';
import { heldWhileWaiting, releaseSlots } from './slots';
import { RECORD_FORMAT } from '../record-format';

/**
 * `ctx.continueAsNew(input)`, fenced, in ONE statement: the run keeps its id, its signals, tags, stream
 * and event trail, and starts a fresh history: input replaced, `generation` + 1, cursor at the start,
 * its checkpoints and commands (all settled: the call waited for every live call) deleted, back to
 * `waiting` and due at once, its slots freed (kept when its kind holds them while waiting: the run has
 * not ended; the next claim takes them back), attempts reset, and a
 * `run.continued_as_new` event with what it deleted. The new history is this release's: its record format. A stale worker matches no row and changes nothing.
 * $1 id, $2 worker, $3 epoch, $4 input, $5 event payload, $6 wake channel
 */
export const CONTINUE_RUN_SQL: SqlText = (t) => `
${fencedRun(
  t,
  `input = $4::jsonb, generation = generation + 1, cursor = default, status = 'waiting',
         worker_id = null, lease_expires_at = null, available_at = now(), attempts = 0, parked_reason = null,
         record_format = ${RECORD_FORMAT}, updated_at = now()`,
  'id, epoch, kind, generation',
)}, ${releaseSlots(t, 'run', heldWhileWaiting(t))}, cps as (
  delete from ${t.checkpoints} c using run where c.run_id = run.id returning c.run_id
), cmds as (
  delete from ${t.commands} c using run where c.run_id = run.id returning c.run_id
), ev as (
  insert into ${t.events} (run_id, event_type, epoch, payload)
  select run.id, 'run.continued_as_new', run.epoch,
         $5::jsonb || jsonb_build_object('generation', run.generation,
                                         'checkpoints', (select count(*) from cps),
                                         'commands', (select count(*) from cmds))
    from run
)
select run.generation, (select count(pg_notify($6, kind)) from run) as woke from run`;

/** Starts the run's next generation with `inputJson` (see CONTINUE_RUN_SQL): its number. */
export async function continueRun(
  s: StoreContext,
  f: Fence,
  inputJson: string,
): Promise<{ generation: number }> {
  const row = await runFenced<{ generation: number }>(
    s,
    f,
    'ctx.continueAsNew',
    CONTINUE_RUN_SQL,
    [inputJson, eventPayload(s.options, 'run.continued_as_new', {}), s.db.names.wakeChannel],
    'dx_continue',
  );
  return { generation: row.generation };
}
