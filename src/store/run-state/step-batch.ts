import type { SqlText } from '../durable-names';
import { CURRENT_TIMELINE, extendLeaseBy, insertRecords, StoreContext } from './fence';
import { BatchItem, FencedBatcher } from './fenced-batcher';

/**
 * Group commit: the step writes of several runs of this worker in ONE statement, each row fenced by
 * its own (run, worker, epoch) and the server's timeline as STEP_WRITE_SQL fences one. A run whose
 * fence no longer matches writes nothing and is absent from the result (LeaseLostError for its
 * caller); the others commit. $1 the writes (JSON array, one object per run: id, worker_id, epoch,
 * cursor, attempt, event, payload, progress, records), $2 ttl ms.
 */
export const STEP_BATCH_SQL: SqlText = (t) => `
with input as (
  select * from jsonb_to_recordset($1::jsonb) as i(id uuid, worker_id text, epoch bigint, cursor jsonb,
    attempt int, event text, payload jsonb, progress boolean, records jsonb)
), run as (
  update ${t.runs} r
     set cursor = i.cursor, attempts = case when i.progress then 0 else r.attempts end,
         ${extendLeaseBy('$2')}, updated_at = now()
    from input i
   where r.id = i.id and r.worker_id = i.worker_id and r.epoch = i.epoch and r.status = 'running'
     and r.timeline = ${CURRENT_TIMELINE}
  returning r.id, r.epoch, r.cancel_requested_at is not null as cancel_requested, i.attempt, i.event,
            i.payload, i.records
), ${insertRecords(t, 'run.records', 'run.attempt', 'cp', "case when run.event = 'run.checkpoint_saved' then run.payload end")}, ev as (
  insert into ${t.events} (run_id, event_type, epoch, payload)
  select run.id, run.event, run.epoch, run.payload from run where run.event <> 'run.checkpoint_saved'
)
select id, cancel_requested from run`;

/** A step write's outcome: whether the run's cancel was requested. */
type StepOutcome = { cancelRequested: boolean };
/** One run's step write, as STEP_BATCH_SQL takes it. @internal */
export type StepWriteItem = BatchItem<StepOutcome>;

type StepRow = { id: string; cancel_requested: boolean };

/** Group commit of step writes (STEP_BATCH_SQL; see FencedBatcher). @internal */
export class StepWriteBatcher extends FencedBatcher<StepOutcome, StepRow> {
  constructor(s: StoreContext, maxInFlight: number) {
    super(
      {
        send: async (items) =>
          (await s.db.query<StepRow>(STEP_BATCH_SQL, [items, s.options.worker.leaseTtlMs], 'dx_step_batch'))
            .rows,
        outcome: (row) => ({ cancelRequested: row.cancel_requested }),
      },
      maxInFlight,
    );
  }
}
