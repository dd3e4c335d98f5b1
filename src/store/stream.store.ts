import { Injectable } from '@nestjs/common';
import type { RunStatus } from '../interfaces/run.interface';
import type { StreamEntry } from '../interfaces/stream.interface';
import { DurableDatabase } from './durable-database';
import type { SqlText } from './durable-names';

/**
 * A page of a run's stream after $2 and the run's status, read in ONE statement (one snapshot): a run
 * seen ended has every entry it wrote in the page or before it. No row: no run. The page stops after
 * $3 entries or after the entry that brings their data (as JSON text) to $4 bytes, whichever comes
 * first: it walks the entries one by one by the primary key, so entries past the page are never read
 * (a count limit alone would load 1000 entries of up to `maxOutputBytes` each). `bytes` is the running
 * total. `superseded` when a later attempt of the same step wrote entries.
 * $1 run id, $2 after seq, $3 most entries, $4 bytes after which the page stops
 */
const READ_STREAM_SQL: SqlText = (t) => `
with recursive page as (
  (select x.*, 1 as n, coalesce(octet_length(x.data::text), 0)::bigint as bytes
     from ${t.stream} x where x.run_id = $1 and x.seq > $2 order by x.seq limit 1)
  union all
  select y.*, p.n + 1, p.bytes + coalesce(octet_length(y.data::text), 0)
    from page p
   cross join lateral (
     select * from ${t.stream} x where x.run_id = $1 and x.seq > p.seq order by x.seq limit 1
   ) y
   where p.n < $3 and p.bytes < $4
)
select r.status, s.seq, s.topic, s.data, s.created_at, s.epoch, s.step_index, s.attempt, s.bytes,
       s.step_index is not null and exists (
         select 1 from ${t.stream} o
          where o.run_id = r.id and o.step_index = s.step_index and (o.epoch, o.attempt) > (s.epoch, s.attempt)
       ) as superseded
  from ${t.runs} r
  left join page s on true
 where r.id = $1
 order by s.seq`;

/** The bytes (data as JSON text) after which a page of a run's stream stops: 1 MiB. */
export const STREAM_PAGE_BYTES = 1 << 20;

/** A page of a run's stream with the run's status; null when there is no such run. */
export interface StreamPage {
  status: RunStatus;
  entries: StreamEntry[];
  /** The size of each entry's data (JSON text, bytes), in the order of `entries`. */
  sizes: number[];
  /** The page stopped at its count or byte limit: more entries may follow it. */
  more: boolean;
}

/** Reads runs' progress streams (`ai_run_stream`). @internal */
@Injectable()
export class StreamStore {
  constructor(private readonly db: DurableDatabase) {}

  /** At most `limit` entries after `after`, stopping after the one that reaches `maxBytes` of data. */
  async read(
    runId: string,
    after: number,
    limit: number,
    maxBytes = STREAM_PAGE_BYTES,
  ): Promise<StreamPage | null> {
    const { rows } = await this.db.query(READ_STREAM_SQL, [runId, after, limit, maxBytes], 'dx_read_stream');
    if (!rows.length) return null;
    const found = rows.filter((r) => r.seq !== null);
    const total = found.length ? Number(found[found.length - 1].bytes) : 0;
    return {
      status: rows[0].status,
      sizes: found.map((r, i) => Number(r.bytes) - (i ? Number(found[i - 1].bytes) : 0)),
      more: found.length >= limit || total >= maxBytes,
      entries: found.map((r) => ({
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
