import type { RunStatus } from '../../interfaces/run.interface';
import type { SqlText } from '../durable-names';
import { CURRENT_TIMELINE, StoreContext } from './fence';
import { BatchItem, FencedBatcher } from './fenced-batcher';
import { finishAfterRun, FinishExprs, finishSet, FINISH_RETURNING } from './finish-run';

/** The finish's values as columns of the batch's input row `i` (`u`), then of CTE `run` (`r`). */
const columns = (from: string): FinishExprs => ({
  status: `${from}.in_status`,
  output: `(${from}.in_output->'v')`, // {"v": <output>}: a JSON null output stays a jsonb null
  error: `${from}.in_error`,
  delay: `${from}.in_delay`,
  attemptsDelta: `${from}.in_attempts_delta`,
  records: `${from}.in_records`,
  event: `${from}.in_event`,
  payload: `${from}.in_payload`,
  parked: `${from}.in_parked`,
  unsent: `${from}.in_unsent`,
  cleansUp: `${from}.in_cleans_up`,
  stepCursor: `${from}.in_step_cursor`,
  stepPayload: `${from}.in_step_payload`,
});

/**
 * Group commit of finishes: FINISH_RUN_SQL for several runs of this worker in ONE statement, each row
 * fenced by its own (run, worker, epoch) and the server's timeline. The same SET, slots, records,
 * commands, events and NOTIFYs as one run's finish (one template, `finishSet` / `finishAfterRun`), for
 * every run whose fence matched; a run whose claim moved on is absent from the result. $1 the finishes
 * (JSON array of objects with the `in_*` columns below), $2 the wake channel.
 */
export const FINISH_BATCH_SQL: SqlText = (t) => {
  const run = `with input as (
  select * from jsonb_to_recordset($1::jsonb) as i(in_id uuid, in_worker text, in_epoch bigint,
    in_status text, in_output jsonb, in_error jsonb, in_delay bigint, in_attempts_delta int,
    in_records jsonb, in_event text, in_payload jsonb, in_parked text, in_unsent text[],
    in_cleans_up boolean, in_step_cursor jsonb, in_step_payload jsonb)
), run as (
  update ${t.runs} r
     set ${finishSet(columns('i'))}
    from input i
   where r.id = i.in_id and r.worker_id = i.in_worker and r.epoch = i.in_epoch and r.status = 'running'
     and r.timeline = ${CURRENT_TIMELINE}
  returning ${FINISH_RETURNING.split(', ')
    .map((c) => `r.${c}`)
    .join(', ')}, i.*
)`;
  return `\n${finishAfterRun(t, run, columns('run'), '$2')}`;
};

/** One run's finish, as FINISH_BATCH_SQL takes it. @internal */
export type FinishItem = BatchItem<RunStatus>;

type FinishRow = { id: string; status: RunStatus };

/** Group commit of finishes (FINISH_BATCH_SQL; see FencedBatcher). @internal */
export class FinishBatcher extends FencedBatcher<RunStatus, FinishRow> {
  constructor(s: StoreContext, maxInFlight: number) {
    super(
      {
        send: async (items) =>
          (await s.db.query<FinishRow>(FINISH_BATCH_SQL, [items, s.db.names.wakeChannel], 'dx_finish_batch'))
            .rows,
        outcome: (row) => row.status,
      },
      maxInFlight,
    );
  }
}
