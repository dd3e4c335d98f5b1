import { LeaseLostError } from '../../errors/lease-lost.error';
import type { SqlText } from '../durable-names';
import { CURRENT_TIMELINE, extendLeaseBy, insertRecords, StoreContext } from './fence';

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
), ${insertRecords(t, 'run.records', 'run.attempt')}, ev as (
  insert into ${t.events} (run_id, event_type, epoch, payload)
  select run.id, run.event, run.epoch, run.payload from run
)
select id, cancel_requested from run`;

/** One run's step write, as the batch statement takes it. @internal */
export interface StepWriteItem {
  runId: string;
  epoch: number;
  /** The item as one element of STEP_BATCH_SQL's $1 (JSON text, built without re-serialising). */
  json: string;
  /** For LeaseLostError: what was being written. */
  during: string;
  /** The same write alone (STEP_WRITE_SQL). */
  alone(): Promise<Outcome>;
}

type Outcome = { cancelRequested: boolean };
interface Waiting extends StepWriteItem {
  resolve(o: Outcome): void;
  reject(e: unknown): void;
}

/**
 * SQLSTATE classes after which the statement's outcome is unknown or the server is going away
 * (connection exception, operator intervention, insufficient resources, system and internal errors):
 * every write of the batch fails with the error, as a write alone would. Any other SQLSTATE means
 * the server rejected the statement and rolled it back: each write is then sent alone, so that one bad
 * row fails only its own run.
 */
const UNKNOWN_OUTCOME = /^(08|53|57|58|XX)/;
const rejectedByServer = (err: unknown): boolean => {
  const code = (err as { code?: unknown })?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && !UNKNOWN_OUTCOME.test(code);
};

/**
 * Sends step writes: alone while fewer than `maxInFlight` step statements are in flight (a lone run's
 * step pays nothing for batching), otherwise queued; when one in flight ends, everything queued goes
 * as one STEP_BATCH_SQL (at most one write per run per batch, in the order they came; at most
 * `maxBatch` writes). @internal
 */
export class StepWriteBatcher {
  private readonly queue: Waiting[] = [];
  private inFlight = 0;
  /** Statements sent, and the writes they carried (tests, the bench). */
  readonly stats = { statements: 0, writes: 0, batches: 0 };

  /**
   * @param maxInFlight step statements in flight before writes queue (`worker.groupCommit`; 0: every
   *   write alone). Writable, for the bench's side-by-side figure.
   */
  constructor(
    private readonly s: StoreContext,
    public maxInFlight: number,
    private readonly maxBatch = 64,
  ) {}

  write(item: StepWriteItem): Promise<Outcome> {
    if (this.maxInFlight <= 0 || (this.inFlight < this.maxInFlight && !this.queue.length)) {
      return this.track(() => this.sendAlone(item));
    }
    return new Promise<Outcome>((resolve, reject) => {
      this.queue.push({ ...item, resolve, reject });
      this.next();
    });
  }

  private track<T>(send: () => Promise<T>): Promise<T> {
    this.inFlight++;
    const p = send();
    void p.then(this.done, this.done);
    return p;
  }

  private readonly done = (): void => {
    this.inFlight--;
    this.next();
  };

  private next(): void {
    while (this.queue.length && this.inFlight < this.maxInFlight) {
      const batch = this.take();
      if (batch.length === 1) {
        const [w] = batch;
        void this.track(() => this.sendAlone(w)).then(w.resolve, w.reject);
      } else {
        void this.track(() => this.sendBatch(batch));
      }
    }
  }

  /** The oldest queued writes, one per run (a run's later write waits for the next batch). */
  private take(): Waiting[] {
    const runs = new Set<string>();
    const batch: Waiting[] = [];
    for (let i = 0; i < this.queue.length && batch.length < this.maxBatch;) {
      const w = this.queue[i];
      if (runs.has(w.runId)) {
        i++;
        continue;
      }
      runs.add(w.runId);
      batch.push(w);
      this.queue.splice(i, 1);
    }
    return batch;
  }

  private sendAlone(item: StepWriteItem): Promise<Outcome> {
    this.stats.statements++;
    this.stats.writes++;
    return item.alone();
  }

  private async sendBatch(batch: Waiting[]): Promise<void> {
    this.stats.statements++;
    this.stats.writes += batch.length;
    this.stats.batches++;
    let rows: Array<{ id: string; cancel_requested: boolean }>;
    try {
      ({ rows } = await this.s.db.query<{ id: string; cancel_requested: boolean }>(
        STEP_BATCH_SQL,
        [`[${batch.map((w) => w.json).join(',')}]`, this.s.options.worker.leaseTtlMs],
        'dx_step_batch',
      ));
    } catch (err) {
      if (!rejectedByServer(err)) {
        for (const w of batch) w.reject(err);
        return;
      }
      // Rolled back: nothing of it was written. Each write alone, so a bad one fails only its run.
      await Promise.all(batch.map((w) => this.sendAlone(w).then(w.resolve, w.reject)));
      return;
    }
    const written = new Map(rows.map((r) => [r.id, r.cancel_requested]));
    for (const w of batch) {
      const cancel = written.get(w.runId);
      if (cancel === undefined) w.reject(new LeaseLostError(w.runId, w.epoch, w.during));
      else w.resolve({ cancelRequested: cancel });
    }
  }
}
