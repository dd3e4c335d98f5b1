import type { MessageEvent } from '@nestjs/common';
import { Observable } from 'rxjs';
import { InvalidArgumentError } from '../errors/invalid-argument.error';
import type { StreamEntry } from '../interfaces/stream.interface';
import type { RunRepository } from './run.repository';

/** Options of `runEventStream`. */
export interface RunEventStreamOptions {
  /**
   * The `Last-Event-ID` header of a reconnecting client (`@Headers('last-event-id')`): the stream goes
   * on after that entry. Absent: from `from`, else from the first entry.
   */
  lastEventId?: string | string[] | null;
  /** Entries after this seq when there is no `lastEventId` (default 0). */
  from?: number;
  /** What a message carries for an entry (default: the entry). Apply your own redaction here. */
  data?: (entry: StreamEntry) => unknown;
  /** Passed to `RunRepository.watch`. */
  pollMs?: number;
  /**
   * The connection the stream is written to (`@Req() req` → `req.socket`): the next entry is taken only
   * once the previous one has left the process (the socket's buffer drained). A client that does not read
   * then costs the entry being written plus what the run's shared reader holds for it (at most
   * FOLLOWER_WINDOW_BYTES, 2 MiB, and one page, then it is detached), instead of every entry of the
   * stream queued in Nest's writer until `maxPendingDataLength`. Without it entries are handed to Nest as
   * they come (Nest drops a client that falls 4 MiB of characters behind, after buffering more).
   */
  socket?: SseSocket;
}

/** What `runEventStream` needs of the connection it paces itself on (a `net.Socket` or an `http.ServerResponse`). */
export interface SseSocket {
  readonly writableNeedDrain: boolean;
  readonly destroyed: boolean;
  once(event: 'drain' | 'close', listener: () => void): unknown;
  removeListener(event: 'drain' | 'close', listener: () => void): unknown;
}

/**
 * Resolves once what was written to `socket` has left the process: after Nest's writer had its turn
 * (it writes a message on the next tick), when the socket needs no drain, or it drained, closed, or
 * the stream stopped.
 */
async function written(socket: SseSocket, signal: AbortSignal): Promise<void> {
  await new Promise<void>((resolve) => setImmediate(resolve));
  if (!socket.writableNeedDrain || socket.destroyed || signal.aborted) return;
  await new Promise<void>((resolve) => {
    const done = () => {
      socket.removeListener('drain', done);
      socket.removeListener('close', done);
      signal.removeEventListener('abort', done);
      resolve();
    };
    socket.once('drain', done);
    socket.once('close', done);
    signal.addEventListener('abort', done);
  });
}

/** How long a slot taken by `runEventStream` waits for the Observable to be subscribed. */
const UNCLAIMED_SLOT_MS = 60_000;

/** The seq a `Last-Event-ID` names; InvalidArgumentError naming the header for anything else. */
function resumeAfter(o: RunEventStreamOptions): number {
  const header = Array.isArray(o.lastEventId) ? o.lastEventId[o.lastEventId.length - 1] : o.lastEventId;
  if (header === undefined || header === null || header === '') return o.from ?? 0;
  if (!/^\d{1,9}$/.test(header))
    throw new InvalidArgumentError('Last-Event-ID', `must be the seq of an entry (digits), got "${header}"`);
  return Number(header);
}

/**
 * A run's progress stream as Server-Sent Events, for a Nest `@Sse()` route (which may return the
 * promise as it is). Before any byte is sent it checks its arguments and that the run exists: a bad
 * `Last-Event-ID` or run id is an InvalidArgumentError, an unknown run a RunNotFoundError, so the route
 * answers 400 or 404 (with `DurableExceptionFilter`) instead of a 200 stream that fails. Then: one message per entry,
 * its `id` the entry's seq (so an `EventSource` that reconnects sends it back as `Last-Event-ID` and
 * misses nothing, sees nothing twice), its data the entry as JSON; once the run has ended and every
 * entry was sent, one `end` event (`{ runId, status }`) and the stream closes. Unsubscribing (the
 * client left) stops the watch. The clients of one run share one reader of its stream (see
 * `RunRepository.watch`); past `limits.maxStreamClients` open clients in this process, a new one is
 * refused before any byte with TooManyStreamClientsError (503 with `DurableExceptionFilter`). Pass the
 * request's socket (`socket: req.socket`) so the stream waits for each entry to be written before it
 * takes the next: a client that does not read then costs a bounded amount (docs/OPERATIONS.md, Limits).
 * @example
 * ```ts
 * @Sse('runs/:id/stream')
 * stream(@Param('id') id: string, @Req() req: Request, @Headers('last-event-id') last?: string) {
 *   return runEventStream(this.runs, id, { lastEventId: last, socket: req.socket });
 * }
 * ```
 */
export async function runEventStream(
  runs: RunRepository,
  runId: string,
  options: RunEventStreamOptions = {},
): Promise<Observable<MessageEvent>> {
  const from = resumeAfter(options);
  // A slot of limits.maxStreamClients (TooManyStreamClientsError before any byte), held for the first
  // subscription; given back if Nest never subscribes (the client left during the setup).
  let reserved: (() => void) | undefined = runs.openStreamClient();
  const unclaimed = setTimeout(() => {
    reserved?.();
    reserved = undefined;
  }, UNCLAIMED_SLOT_MS);
  unclaimed.unref();
  try {
    await runs.stream(runId, { from, limit: 1 }); // RunNotFoundError before the headers are sent
  } catch (err) {
    clearTimeout(unclaimed);
    reserved?.();
    throw err;
  }
  return new Observable<MessageEvent>((subscriber) => {
    let release = reserved;
    reserved = undefined;
    clearTimeout(unclaimed);
    try {
      release ??= runs.openStreamClient(); // a second subscription is another client
    } catch (err) {
      subscriber.error(err);
      return;
    }
    const stop = new AbortController();
    void (async () => {
      let last = from;
      for await (const entry of runs.watch(runId, { from, signal: stop.signal, pollMs: options.pollMs })) {
        subscriber.next({ id: String(entry.seq), data: (options.data ?? ((e) => e))(entry) as object });
        last = entry.seq;
        // Backpressure: the next entry stays in the stream's shared reader (its per-follower window)
        // until this one has left, so a client that does not read holds one entry here.
        if (options.socket) await written(options.socket, stop.signal);
      }
      if (stop.signal.aborted) return;
      const run = await runs.get(runId);
      // Its id is the last entry's (Nest would number it otherwise): a reconnect after it resumes right.
      subscriber.next({ type: 'end', id: String(last), data: { runId, status: run?.status ?? null } });
      subscriber.complete();
    })().catch((err: unknown) => subscriber.error(err));
    return () => {
      stop.abort();
      release();
    };
  });
}
