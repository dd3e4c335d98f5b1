import { Injectable } from '@nestjs/common';
import type { CommandView } from '../interfaces/command.interface';
import { DurableDatabase } from './durable-database';
import type { SqlText } from './durable-names';
import type { HistoryRange } from '../util/run-cursor';
import { readHistory } from './run-history';

/** The commands of one run in step order, optionally of one status. $1 run id, $2 status (null: any) */
export const LIST_COMMANDS_SQL: SqlText = (t) =>
  `select * from ${t.commands} where run_id = $1 and ($2::text is null or status = $2) order by step_index, created_at`;

/**
 * The run's commands that may still need an operator (pending, in doubt, awaiting approval), in step
 * order, through the partial index ai_commands_unsettled_idx. $1 run id
 */
export const LIST_UNSETTLED_COMMANDS_SQL: SqlText = (t) =>
  `select * from ${t.commands} where run_id = $1 and status in ('pending', 'in_doubt', 'awaiting_approval')
    order by step_index limit $2`;

/** One command of a run by its key (the primary key; a key of another run finds nothing). $1 run id, $2 key */
export const RUN_COMMAND_SQL: SqlText = (t) =>
  `select * from ${t.commands} where idempotency_key = $2 and run_id = $1`;

/**
 * An operator decision on one command (approve, reject, resolve), in one statement: the row moves only
 * from an allowed status, the run is woken if it is parked, one event records who decided. The row
 * lock orders concurrent decisions: the second sees the first's result and changes nothing. The run
 * row is locked first (the order every fenced write of a run uses, so the two never deadlock) and
 * touched when the run is running, so a park racing this decision stays due (PARK_RUN_SQL).
 * $1 run id (null: any run), $2 key, $3 allowed statuses, $4 new status, $5 result, $6 error,
 * $7 resolution, $8 by, $9 note, $10 event type, $11 event payload, $12 channel
 */
export const DECIDE_COMMAND_SQL: SqlText = (t) => `
with run_lock as (
  select r.id, r.epoch from ${t.runs} r
   where r.id = (select run_id from ${t.commands} where idempotency_key = $2)
   for update
), cmd as (
  -- Joining run_lock makes it run first (an unreferenced CTE never runs, and one first read after
  -- \`wake\` changed the row would find nothing): run row, then command row, as fenced writes lock.
  select c.idempotency_key, c.run_id, c.status, run_lock.epoch from ${t.commands} c
    join run_lock on run_lock.id = c.run_id
   where c.idempotency_key = $2 and ($1::uuid is null or c.run_id = $1::uuid)
   for update of c
), upd as (
  update ${t.commands} c
     set status = $4, result = coalesce($5::jsonb, c.result), error = coalesce($6::jsonb, c.error),
         resolution = $7, approved_by = $8, decision_note = $9, updated_at = now()
    from cmd
   where c.idempotency_key = cmd.idempotency_key and cmd.status = any($3::text[])
  returning c.run_id
), wake as (
  update ${t.runs} r
     set available_at = case when r.status = 'waiting' then now() else r.available_at end,
         parked_reason = case when r.status = 'waiting' then null else r.parked_reason end,
         updated_at = now()
    from upd where r.id = upd.run_id and r.status in ('waiting', 'running')
  returning r.kind, r.status
), ev as (
  insert into ${t.events} (run_id, event_type, epoch, payload)
  -- The epoch of the run row's newest version (run_lock locked it), not the snapshot's: a claim
  -- that committed meanwhile must not see this event filed under the epoch before it.
  select upd.run_id, $10, cmd.epoch, $11::jsonb from upd join cmd on cmd.run_id = upd.run_id
)
select cmd.status as previous_status, cmd.run_id, (select count(*) from upd)::int as updated,
       (select count(pg_notify($12, kind)) from wake where wake.status = 'waiting')::int as woke
  from cmd`;

/** One operator decision on a command (DECIDE_COMMAND_SQL's values but the channel). */
export interface CommandDecision {
  /** The run the command must belong to; null: any run. */
  runId: string | null;
  key: string;
  /** The statuses the command may move from. */
  from: string[];
  to: string;
  result: string | null;
  error: string | null;
  resolution: string | null;
  by: string;
  note: string | null;
  eventType: string;
  eventPayload: string;
}

/**
 * Side-effect commands as operators see them: reads, and decisions (approve, reject, resolve), one
 * statement each. Commands are otherwise written only by fenced writes inside runs. @internal
 */
@Injectable()
export class CommandStore {
  constructor(private readonly db: DurableDatabase) {}

  /** The run's commands in step order, of `status` when given. */
  async listForRun(runId: string, status: CommandView['status'] | null): Promise<CommandView[]> {
    const { rows } = await this.db.query(LIST_COMMANDS_SQL, [runId, status]);
    return rows.map(toCommandView);
  }

  /** The run's first `limit` pending, in-doubt and awaiting-approval commands, in step order. */
  async unsettled(runId: string, limit: number): Promise<CommandView[]> {
    const { rows } = await this.db.query(LIST_UNSETTLED_COMMANDS_SQL, [runId, limit]);
    return rows.map(toCommandView);
  }

  /** The run's command with this key, or undefined (one row, by primary key). */
  async ofRun(runId: string, key: string): Promise<CommandView | undefined> {
    const { rows } = await this.db.query(RUN_COMMAND_SQL, [runId, key]);
    return rows[0] ? toCommandView(rows[0]) : undefined;
  }

  /** The run's commands in `range` by step index (run-history.ts). */
  async page(runId: string, range: HistoryRange): Promise<CommandView[]> {
    return (await readHistory(this.db, 'commands', runId, range)).map(toCommandView);
  }

  /**
   * Applies the decision, waking the run if it is parked: the command's status before and whether it
   * moved (it does only from an allowed status), or undefined for an unknown command.
   */
  async decide(
    d: CommandDecision,
  ): Promise<{ previousStatus: CommandView['status']; updated: boolean } | undefined> {
    const { rows } = await this.db.query(DECIDE_COMMAND_SQL, [
      d.runId,
      d.key,
      d.from,
      d.to,
      d.result,
      d.error,
      d.resolution,
      d.by,
      d.note,
      d.eventType,
      d.eventPayload,
      this.db.names.wakeChannel,
    ]);
    return rows[0] && { previousStatus: rows[0].previous_status, updated: rows[0].updated > 0 };
  }
}

function toCommandView(r: Record<string, any>): CommandView {
  return {
    idempotencyKey: r.idempotency_key,
    runId: r.run_id,
    stepIndex: r.step_index,
    name: r.command_name,
    payload: r.payload,
    status: r.status,
    result: r.result,
    error: r.error,
    epoch: Number(r.epoch),
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}
