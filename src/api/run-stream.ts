import { Inject, Injectable } from '@nestjs/common';
import { DURABLE_EXECUTION_OPTIONS } from '../durable-execution.constants';
import { InvalidArgumentError } from '../errors/invalid-argument.error';
import { RunNotFoundError } from '../errors/run-not-found.error';
import { TooManyStreamClientsError } from '../errors/too-many-stream-clients.error';
import type { StreamEntry, StreamQuery, WatchOptions } from '../interfaces/stream.interface';
import type { ResolvedDurableOptions } from '../options/durable-execution-options.interface';
import { StreamListener } from '../store/stream-listener';
import { StreamStore } from '../store/stream.store';
import { requireInt4 } from '../util/arguments';
import { requireUuid } from '../util/uuid';
import { StreamFanout } from './stream-fanout';

/** The most entries one read returns. */
export const MAX_STREAM_PAGE = 1000;

/**
 * `RunRepository.stream`: the entries after `from`, checked arguments; RunNotFoundError when none. At
 * most `limit` entries, and the page stops after the entry that brings it to STREAM_PAGE_BYTES of data.
 */
export async function readStream(
  store: StreamStore,
  id: string,
  q: StreamQuery = {},
): Promise<StreamEntry[]> {
  requireUuid(id, 'id');
  const from = requireInt4(q.from ?? 0, 'from', 0);
  const limit = requireInt4(q.limit ?? 500, 'limit', 1);
  if (limit > MAX_STREAM_PAGE)
    throw new InvalidArgumentError('limit', `must be at most ${MAX_STREAM_PAGE}, got ${limit}`);
  const page = await store.read(id, from, limit);
  if (!page) throw new RunNotFoundError(id);
  return page.entries;
}

/**
 * `RunRepository.watch`: every entry after `from`, in order, each once; live through NOTIFY (a wait is
 * armed before each read, so nothing written after it is missed), read again at least every `pollMs`.
 * The watchers of one run in this process share one reader (`StreamFanout`). Ends when the run has
 * ended and its last entry was delivered (status and entries come from one snapshot), or when `signal`
 * aborts. Arguments are checked at the first `next()`.
 */
export async function* watchStream(
  fanout: StreamFanout,
  id: string,
  o: WatchOptions = {},
): AsyncGenerator<StreamEntry, void, undefined> {
  requireUuid(id, 'id');
  const from = requireInt4(o.from ?? 0, 'from', 0);
  const pollMs = requireInt4(o.pollMs ?? 1000, 'pollMs', 1);
  yield* fanout.follow(id, from, pollMs, o.signal);
}

/** Reads and follows runs' streams, for `RunRepository` and the SSE helpers. @internal */
@Injectable()
export class RunStreamReader {
  /** The shared readers of the runs watched in this process. */
  readonly fanout: StreamFanout;
  private clients = 0;

  constructor(
    private readonly store: StreamStore,
    listener: StreamListener,
    @Inject(DURABLE_EXECUTION_OPTIONS) private readonly options: ResolvedDurableOptions,
  ) {
    this.fanout = new StreamFanout(store, listener);
  }

  read(id: string, q?: StreamQuery): Promise<StreamEntry[]> {
    return readStream(this.store, id, q);
  }

  watch(id: string, o?: WatchOptions): AsyncGenerator<StreamEntry, void, undefined> {
    return watchStream(this.fanout, id, o);
  }

  /**
   * Takes one of the process's `limits.maxStreamClients` SSE client slots, or throws
   * TooManyStreamClientsError when none is free; returns its release (idempotent).
   */
  openClient(): () => void {
    const max = this.options.limits.maxStreamClients;
    if (this.clients >= max) throw new TooManyStreamClientsError(max);
    this.clients++;
    let open = true;
    return () => {
      if (open) this.clients--;
      open = false;
    };
  }

  /** SSE clients open now. */
  get openClients(): number {
    return this.clients;
  }
}
