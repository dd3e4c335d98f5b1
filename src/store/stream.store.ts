import { Injectable } from '@nestjs/common';
import type { RunStatus } from '../interfaces/run.interface';
import type { StreamEntry } from '../interfaces/stream.interface';
import { DurableDatabase } from './durable-database';
import type { SqlText } from './durable-names';

/**
 * A page of a run's stream after $2 (at most $3 entries), and the run's status, read in ONE statement
 * (one snapshot): a run seen ended has every entry it wrote in the page or before it. No row: no run.
 * `superseded` when a later attempt of the same step wrote entries. $1 run id, $2 after seq, $3 limit
 */
const READ_STREAM_SQL: SqlText = (t) => `
select r.status, s.seq, s.topic, s.data, s.created_at, s.epoch, s.step_index, s.attempt,
       s.step_index is not null and exists (
         select 1 from ${t.stream} o
          where o.run_id = r.id and o.step_index = s.step_index and (o.epoch, o.attempt) > (s.epoch, s.attempt)
       ) as superseded
  from ${t.runs} r
  left join lateral (
    select * from ${t.stream} x where x.run_id = r.id and x.seq > $2 order by x.seq limit $3
  ) s on true
 where r.id = $1
 order by s.seq`;

/** A page of a run's stream with the run's status; null when there is no such run. */
export interface StreamPage {
  status: RunStatus;
  entries: StreamEntry[];
}

/** Reads runs' progress streams (`ai_run_stream`). @internal */
@Injectable()
export class StreamStore {
  constructor(private readonly db: DurableDatabase) {}

  async read(runId: string, after: number, limit: number): Promise<StreamPage | null> {
    const { rows } = await this.db.query(READ_STREAM_SQL, [runId, after, limit], 'dx_read_stream');
    if (!rows.length) return null;
    return {
      status: rows[0].status,
      entries: rows
        .filter((r) => r.seq !== null)
        .map((r) => ({
          runId,
          seq: r.seq,
          topic: r.topic,
          data: r.data,
          at: r.created_at,
          epoch: Number(r.epoch),
          step: r.step_index,
          attempt: r.attempt,
          superseded: r.superseded,
        })),
    };
  }
}
