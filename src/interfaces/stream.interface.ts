/**
 * One entry of a run's progress stream (`ctx.emit(topic, data)`), as `RunRepository.stream` and
 * `RunRepository.watch` return it. See docs/STREAMING.md.
 */
export interface StreamEntry<D = unknown> {
  /** The run that wrote it. */
  runId: string;
  /** Its position in the run's stream: 1, 2, … with no gap. Resume after it with `{ from: seq }`. */
  seq: number;
  /** What it is about, as `ctx.emit(topic, data)` named it. */
  topic: string;
  /** Its data as stored (JSON). */
  data: D;
  /** When it was written (database clock). */
  at: Date;
  /** The claim that wrote it. */
  epoch: number;
  /** The step whose body emitted it, or null when the workflow body did. */
  step: number | null;
  /** With `step`: that step's attempt within its claim (1, 2, … for retries), else null. */
  attempt: number | null;
  /**
   * With `step`: a later attempt of the same step (a higher `epoch`, or the same epoch and a higher
   * `attempt`) has written entries, so this one belongs to an attempt that was cut off or failed.
   * Computed when read: `watch` delivers each entry once, as it was when written.
   */
  superseded: boolean;
}

/** Which part of a run's stream to read. */
export interface StreamQuery {
  /** Entries after this seq (default 0: from the first). */
  from?: number;
  /** At most this many (default 500, at most 1000). */
  limit?: number;
}

/** Options of `RunRepository.watch`. */
export interface WatchOptions {
  /** Entries after this seq (default 0: from the first); an SSE client's `Last-Event-ID`. */
  from?: number;
  /** Stops the iteration (the iterator returns). */
  signal?: AbortSignal;
  /**
   * Longest wait for a NOTIFY before the stream is read again anyway (default 1000 ms): bounds what a
   * lost connection or the run's end costs. The stream ends once the run has ended and every entry
   * was delivered.
   */
  pollMs?: number;
}
