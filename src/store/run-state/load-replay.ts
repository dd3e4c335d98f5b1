import type { StoreContext } from './fence';
import type { SqlText } from '../durable-names';
import type { HistoryCheckpoint, HistoryCommand } from '../../interfaces/run-history.interface';
import { decodeStored } from '../../util/codec';

/**
 * Everything replay needs, in one round trip per claim: the run's checkpoints (with their delivery
 * order and call fingerprint) and its commands (by idempotency key, to settle in-doubt ones). Replay
 * then reads memory, never one query per step. A first claim (epoch 1) skips this entirely: nothing
 * can have been recorded before it. $1 run id
 */
export const LOAD_REPLAY_SQL: SqlText = (t) => `
select 'checkpoint' as source, step_index, step_name as name, output, null::text as status,
       null::jsonb as error, null::text as resolution, seq, fingerprint, null::jsonb as payload,
       null::text as command_name, coalesce((meta->>'failed')::boolean, false) as failed, epoch,
       coalesce((meta->>'undefined')::boolean, false) as undef
  from ${t.checkpoints} where run_id = $1
union all
select 'command', step_index, idempotency_key, result, status, error, resolution, null, null, payload,
       command_name, false, null, false
  from ${t.commands} where run_id = $1`;

/** A checkpoint as loaded for replay (as in an exported history, without its index). */
export type RecordedStep = Omit<HistoryCheckpoint, 'index'>;

/** A command row as loaded for replay (as in an exported history, without its key). */
export type CommandRow = Omit<HistoryCommand, 'key'>;

/** What a resumed claim replays from: checkpoints by step index, commands by idempotency key. */
export interface ReplayRecord {
  checkpoints: Map<number, RecordedStep>;
  commands: Map<string, CommandRow>;
}

/**
 * Checkpoints (index → entry) and commands (key → row) of a run for replay, in one query. Every value
 * passes the codec's decode, as the first execution's did.
 */
export async function loadForReplay(s: StoreContext, runId: string): Promise<ReplayRecord> {
  const { rows } = await s.db.query(LOAD_REPLAY_SQL, [runId], 'dx_load_replay');
  return replayRecordOf(rows);
}

/** The rows of LOAD_REPLAY_SQL as a replay record, every value through the codec's decode. */
export function replayRecordOf(rows: Record<string, any>[]): ReplayRecord {
  const checkpoints = new Map<number, RecordedStep>();
  const commands = new Map<string, CommandRow>();
  for (const r of rows) {
    if (r.source === 'checkpoint')
      checkpoints.set(r.step_index, {
        name: r.name,
        // A step that returned undefined is stored as null with the `undefined` mark (JSON has no undefined).
        output: r.undef ? undefined : decodeStored(r.output),
        seq: r.seq,
        fingerprint: r.fingerprint,
        failed: r.failed,
        epoch: Number(r.epoch),
      });
    else
      commands.set(r.name, {
        index: r.step_index,
        name: r.command_name,
        status: r.status,
        result: decodeStored(r.output),
        error: decodeStored(r.error),
        resolution: r.resolution,
        payload: decodeStored(r.payload),
      });
  }
  return { checkpoints, commands };
}
