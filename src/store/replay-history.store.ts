import { Injectable } from '@nestjs/common';
import { HISTORY_FORMAT, RunHistory } from '../interfaces/run-history.interface';
import { decodeStored } from '../util/codec';
import { DurableDatabase } from './durable-database';
import type { SqlText } from './durable-names';
import { pinnedVersion } from './sql/pinned-version.sql';
import { LOAD_REPLAY_SQL, replayRecordOf } from './run-state/load-replay';

/**
 * The run row, with its row version (`xmin`: changes with every update of the row, unlike `updated_at`,
 * which node-pg reads to the millisecond: two writes in one millisecond looked like none). $1 run id
 */
const RUN_SQL: SqlText = (t) =>
  `select id, kind, ${pinnedVersion()} as kind_version, status, input, output,
          error, cursor, epoch, timeline, generation, max_attempts, xmin::text as version,
          now() as db_now
     from ${t.runs} where id = $1`;

const KIND_RUNS_SQL: SqlText = (t) =>
  `select id from ${t.runs} where kind = $1 and status not in ('pending', 'running')
    order by created_at desc, id limit $2`;

/** Runs one statement of the module's (for its schema) and returns its rows. */
export type HistoryQuery = (sql: SqlText, params: unknown[]) => Promise<{ rows: Record<string, any>[] }>;

/**
 * A run's stored record as one JSON document, read from one point in time (read again while a writer
 * moves the run; one that keeps moving is reported `running`, and not checked), or null.
 */
export async function readRunHistory(query: HistoryQuery, runId: string): Promise<RunHistory | null> {
  for (let tries = 0; ; tries++) {
    const first = (await query(RUN_SQL, [runId])).rows[0];
    if (!first) return null;
    const record = replayRecordOf((await query(LOAD_REPLAY_SQL, [runId])).rows);
    const again = (await query(RUN_SQL, [runId])).rows[0];
    // Moved while the record was read (a commit, a finish): read again. The row's version, not its
    // updated_at: a step's outcome and the run's finish in one millisecond left updated_at "unchanged",
    // and a record read between them was checked as a succeeded run's (a command past its end).
    const moving = !again || again.version !== first.version;
    if (moving && tries < 10) continue;
    const r = again ?? first;
    return {
      format: HISTORY_FORMAT,
      exportedAt: new Date(r.db_now).toISOString(),
      run: {
        id: r.id,
        kind: r.kind,
        ...(r.kind_version != null ? { version: r.kind_version } : {}),
        status: moving ? 'running' : r.status,
        input: decodeStored(r.input),
        output: decodeStored(r.output ?? null),
        error: r.error ?? null,
        cursor: decodeStored(r.cursor),
        epoch: Number(r.epoch),
        timeline: r.timeline,
        generation: r.generation,
        maxAttempts: r.max_attempts,
      },
      checkpoints: [...record.checkpoints].map(([index, rec]) => ({ index, ...rec })),
      commands: [...record.commands].map(([key, cmd]) => ({ key, ...cmd })),
    };
  }
}

/** Reads runs' records for the replay check. @internal */
@Injectable()
export class ReplayHistoryStore {
  constructor(private readonly db: DurableDatabase) {}

  /** A run's record as a history document, or null. */
  exportHistory(runId: string): Promise<RunHistory | null> {
    return readRunHistory((sql, params) => this.db.query(sql, params), runId);
  }

  /** The newest `limit` runs of `kind` that are not pending or running. */
  async recentRunIds(kind: string, limit: number): Promise<string[]> {
    const { rows } = await this.db.query<{ id: string }>(KIND_RUNS_SQL, [kind, limit]);
    return rows.map((r) => r.id);
  }
}
