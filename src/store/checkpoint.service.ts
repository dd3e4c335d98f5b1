import { Injectable } from '@nestjs/common';
import type { CheckpointView } from '../interfaces/run.interface';
import { DurableDatabase } from './durable-database';
import { toCheckpoint } from './run-row.mapper';
import { LOAD_REPLAY_SQL } from './sql/load-checkpoints.sql';
import type { CommandRow } from '../engine/active-run';
import type { RecordedStep } from '../engine/replay-log';

/** Reads checkpoints. Writes happen only inside LeaseService's fenced statements. */
@Injectable()
export class CheckpointService {
  constructor(private readonly db: DurableDatabase) {}

  /** Checkpoints (index → entry) and commands (key → row) of a run for replay, in one query. */
  async loadForReplay(runId: string): Promise<{
    checkpoints: Map<number, RecordedStep>;
    commands: Map<string, CommandRow>;
  }> {
    const { rows } = await this.db.query(LOAD_REPLAY_SQL, [runId], 'dx_load_replay');
    const checkpoints = new Map<number, RecordedStep>();
    const commands = new Map<string, CommandRow>();
    for (const r of rows) {
      if (r.source === 'checkpoint')
        checkpoints.set(r.step_index, {
          name: r.name,
          output: r.output,
          seq: r.seq,
          fingerprint: r.fingerprint,
        });
      else
        commands.set(r.name, {
          status: r.status,
          result: r.output,
          error: r.error,
          resolution: r.resolution,
          payload: r.payload,
        });
    }
    return { checkpoints, commands };
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
