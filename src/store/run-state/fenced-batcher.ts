import { LeaseLostError } from '../../errors/lease-lost.error';

/** One run's fenced write, as a batch statement takes it. @internal */
export interface BatchItem<R> {
  runId: string;
  epoch: number;
  /**
   * The item as one element of the batch statement's $1 (JSON text, built without re-serialising):
   * built only when the write goes in a batch (a write sent alone never needs it).
   */
  json(): string;
  /** For LeaseLostError: what was being written. */
  during: string;
  /** The same write alone (its single-run statement). */
  alone(): Promise<R>;
}

interface Waiting<R> extends BatchItem<R> {
  resolve(o: R): void;
  reject(e: unknown): void;
}

/** A batch statement: how it is sent (the items as one JSON array), and a row's outcome. */
export interface BatchStatement<R, Row> {
  /** Sends the statement with `$1` the items (JSON array text); its rows, one per run written. */
  send(items: string): Promise<Row[]>;
  /** The outcome of a run's row (the row carries the run's `id`). */
  outcome(row: Row): R;
}

/**
 * SQLSTATE classes after which the statement's outcome is unknown or the server is going away
 * (connection exception, operator intervention, insufficient resources, system and internal errors):
 * every write of the batch fails with the error, as a write alone would. Any other SQLSTATE means
 * the server rejected the statement and rolled it back: each write is then sent alone, so that one bad
 * row fails only its own run.
 */
const UNKNOWN_OUTCOME = /^(08|53|57|58|XX)/;
/** The server refused the statement and rolled it back (a SQLSTATE outside UNKNOWN_OUTCOME). @internal */
export const rejectedByServer = (err: unknown): boolean => {
  const code = (err as { code?: unknown })?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && !UNKNOWN_OUTCOME.test(code);
};

/**
 * Group commit of one kind of fenced write: alone while fewer than `maxInFlight` of its statements are
 * in flight (a lone run's write pays nothing for batching), otherwise queued; when one in flight ends,
 * everything queued goes as ONE batch statement (at most one write per run per batch, in the order
 * they came; at most `maxBatch` writes), each row fenced by its own run: a run absent from the result
 * gets LeaseLostError, the others their outcome. @internal
 */
export class FencedBatcher<R, Row extends { id: string }> {
  private readonly queue: Waiting<R>[] = [];
  private inFlight = 0;
  /**
   * Runs with a write of theirs in a batch in flight: their next write waits for it. Two batches in
   * flight then never share a run, so they cannot lock two runs' rows in opposite orders (a deadlock
   * the server would break only after `deadlock_timeout`), and a run's writes stay in order.
   */
  private readonly busy = new Set<string>();
  /** Statements sent, and the writes they carried (tests, the bench). */
  readonly stats = { statements: 0, writes: 0, batches: 0 };

  /**
   * @param maxInFlight statements in flight before writes queue (`worker.groupCommit`; 0: every write
   *   alone). Writable, for the bench's side-by-side figure.
   */
  constructor(
    private readonly statement: BatchStatement<R, Row>,
    public maxInFlight: number,
    private readonly maxBatch = 64,
  ) {}

  write(item: BatchItem<R>): Promise<R> {
    if (this.maxInFlight <= 0 || (this.inFlight < this.maxInFlight && !this.queue.length)) {
      return this.track(() => this.sendAlone(item));
    }
    return new Promise<R>((resolve, reject) => {
      this.queue.push({ ...item, resolve, reject });
      this.next();
    });
  }

  /**
   * Runs `write` (a write of run `runId` that does not go through this batcher: a durable transaction's
   * commit on its own connection) with the run marked busy: no batch takes a write of the run meanwhile.
   */
  async exclusive<T>(runId: string, write: () => Promise<T>): Promise<T> {
    this.busy.add(runId);
    try {
      return await write();
    } finally {
      this.busy.delete(runId);
      this.next();
    }
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
      if (!batch.length) return; // each queued write's run is in a batch in flight: its end calls next()
      if (batch.length === 1) {
        const [w] = batch;
        void this.track(() => this.sendAlone(w)).then(w.resolve, w.reject);
      } else {
        void this.track(() => this.sendBatch(batch));
      }
    }
  }

  /**
   * The oldest queued writes, one per run and none of a run in a batch in flight (a run's later write
   * waits for the next statement).
   */
  private take(): Waiting<R>[] {
    const runs = new Set<string>();
    const batch: Waiting<R>[] = [];
    for (let i = 0; i < this.queue.length && batch.length < this.maxBatch;) {
      const w = this.queue[i];
      if (runs.has(w.runId) || this.busy.has(w.runId)) {
        i++;
        continue;
      }
      runs.add(w.runId);
      batch.push(w);
      this.queue.splice(i, 1);
    }
    return batch;
  }

  private sendAlone(item: BatchItem<R>): Promise<R> {
    this.stats.statements++;
    this.stats.writes++;
    return item.alone();
  }

  private async sendBatch(batch: Waiting<R>[]): Promise<void> {
    this.stats.statements++;
    this.stats.writes += batch.length;
    this.stats.batches++;
    for (const w of batch) this.busy.add(w.runId);
    try {
      await this.settleBatch(batch);
    } finally {
      for (const w of batch) this.busy.delete(w.runId);
    }
  }

  private async settleBatch(batch: Waiting<R>[]): Promise<void> {
    let rows: Row[];
    try {
      rows = await this.statement.send(`[${batch.map((w) => w.json()).join(',')}]`);
    } catch (err) {
      if (!rejectedByServer(err)) {
        for (const w of batch) w.reject(err);
        return;
      }
      // Rolled back: nothing of it was written. Each write alone, so a bad one fails only its run.
      await Promise.all(batch.map((w) => this.sendAlone(w).then(w.resolve, w.reject)));
      return;
    }
    const written = new Map(rows.map((r) => [r.id, r]));
    for (const w of batch) {
      const row = written.get(w.runId);
      if (row === undefined) w.reject(new LeaseLostError(w.runId, w.epoch, w.during));
      else w.resolve(this.statement.outcome(row));
    }
  }
}
