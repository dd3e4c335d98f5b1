import { Injectable } from '@nestjs/common';
import type { CheckpointView } from '../interfaces/run.interface';
import { DurableDatabase } from '../persistence/durable-database';
import { toCheckpoint } from '../persistence/run-row.mapper';
import { LOAD_COMMANDS_SQL } from '../persistence/sql/command.sql';
import { LOAD_CHECKPOINTS_SQL } from '../persistence/sql/load-checkpoints.sql';
import type { CommandRow } from '../runtime/active-run';

/** Reads checkpoints. Writes happen only inside LeaseService's fenced statements. */
@Injectable()
export class CheckpointService {
  constructor(private readonly db: DurableDatabase) {}

  /** Every checkpoint of a run for replay, in one query: index → { name, output }. */
  async loadForReplay(runId: string): Promise<Map<number, { name: string; output: unknown }>> {
    const { rows } = await this.db.query(LOAD_CHECKPOINTS_SQL, [runId], 'dx_load_checkpoints');
    return new Map(
      rows.map((r) => [r.step_index as number, { name: r.step_name as string, output: r.output }]),
    );
  }

  /** Every command of a run by idempotency key, for replay (one query per claim). */
  async loadCommands(runId: string): Promise<Map<string, CommandRow>> {
    const { rows } = await this.db.query(LOAD_COMMANDS_SQL, [runId], 'dx_load_commands');
    return new Map(
      rows.map((r) => [
        r.idempotency_key as string,
        { status: r.status, result: r.result, error: r.error, resolution: r.resolution },
      ]),
    );
  }

  /** Every checkpoint of a run with its metadata, in step order. */
  async list(runId: string): Promise<CheckpointView[]> {
    const { rows } = await this.db.query(
      `select * from ai_checkpoints where run_id = $1 order by step_index`,
      [runId],
    );
    return rows.map(toCheckpoint);
  }
}
