import type { RunCursor } from '../../interfaces/run.interface';
import { eventPayload } from '../event-payload';
import {
  CheckpointWrite,
  extendLeaseBy,
  Fence,
  fencedRun,
  insertRecords,
  recordset,
  runFenced,
  StoreContext,
} from './fence';
import type { SqlText } from '../durable-names';
import { CLEANUP_BASE } from './cleanup-mark';

/**
 * Reserve a command before dispatch, fenced, in one statement: the run's cursor says `started`, the
 * command row exists (new) or is taken back from pending / in_doubt / approved for a re-dispatch under
 * this epoch, and `tool.command_reserved` is in the trail. Returns the cancel flag so a cancelled run
 * never dispatches (and then reserves nothing, so no command is left in doubt that was never sent;
 * the cleanup after a cancel, at positions above CLEANUP_BASE, does reserve),
 * and `reserved` = 0 when the row was already settled (an operator decided it meanwhile): the caller
 * must not dispatch then. $1 id, $2 worker, $3 epoch, $4 cursor, $5 ttl ms, $6 key, $7 step index, $8 name,
 * $9 payload, $10 event payload, $11 recorded values
 */
export const RESERVE_COMMAND_SQL: SqlText = (t) => `
${fencedRun(t, `cursor = $4::jsonb, ${extendLeaseBy('$5')}, updated_at = now()`)}, cmd as (
  insert into ${t.commands} (idempotency_key, run_id, step_index, command_name, payload, status, epoch)
  select $6, run.id, $7, $8, $9::jsonb, 'pending', run.epoch from run
   where not run.cancel_requested or $7 > ${CLEANUP_BASE} -- the cleanup after a cancel reserves its own
  on conflict (idempotency_key) do update
     set status = 'pending', epoch = excluded.epoch, resolution = null, error = null, updated_at = now()
   where ai_commands.status in ('pending', 'in_doubt', 'approved') and ai_commands.run_id = excluded.run_id
  returning idempotency_key
), ${insertRecords(t, '$11')}, ev as (
  insert into ${t.events} (run_id, event_type, epoch, payload)
  select run.id, 'tool.command_reserved', run.epoch, $10::jsonb from run
)
select run.cancel_requested, (select count(*) from cmd)::int as reserved from run`;

/** The command a run is about to send: key, step index, name and arguments (JSON text). */
export interface CommandToReserve {
  key: string;
  index: number;
  name: string;
  payloadJson: string;
}

/** Reserves `cmd` (fenced). `reserved` false: an operator settled it meanwhile, do not send it. */
export async function reserveCommand(
  s: StoreContext,
  f: Fence,
  cursor: RunCursor,
  cmd: CommandToReserve,
  records: CheckpointWrite[],
): Promise<{ cancelRequested: boolean; reserved: boolean }> {
  const payload = { key: cmd.key, name: cmd.name, step: cmd.index };
  const row = await runFenced<{ cancel_requested: boolean; reserved: number }>(
    s,
    f,
    `reserve of command ${cmd.key}`,
    RESERVE_COMMAND_SQL,
    [
      JSON.stringify(cursor),
      s.options.worker.leaseTtlMs,
      cmd.key,
      cmd.index,
      cmd.name,
      cmd.payloadJson,
      eventPayload(s.options, 'tool.command_reserved', payload),
      recordset(records),
    ],
    'dx_reserve_command',
  );
  return { cancelRequested: row.cancel_requested, reserved: row.reserved === 1 };
}
