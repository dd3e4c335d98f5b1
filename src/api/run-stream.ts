import { Injectable } from '@nestjs/common';
import { InvalidArgumentError } from '../errors/invalid-argument.error';
import { RunNotFoundError } from '../errors/run-not-found.error';
import { TERMINAL_STATUSES } from '../interfaces/run.interface';
import type { StreamEntry, StreamQuery, WatchOptions } from '../interfaces/stream.interface';
import { StreamListener } from '../store/stream-listener';
import { StreamStore } from '../store/stream.store';
import { requireInt4 } from '../util/arguments';
import { requireUuid } from '../util/uuid';

/** The most entries one read returns. */
export const MAX_STREAM_PAGE = 1000;

/** `RunRepository.stream`: the entries after `from`, checked arguments; RunNotFoundError when none. */
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
 * Ends when the run has ended and its last entry was delivered (status and entries come from one
 * snapshot), or when `signal` aborts. Arguments are checked at the first `next()`.
 */
export async function* watchStream(
  store: StreamStore,
  listener: StreamListener,
  id: string,
  o: WatchOptions = {},
): AsyncGenerator<StreamEntry, void, undefined> {
  requireUuid(id, 'id');
  let from = requireInt4(o.from ?? 0, 'from', 0);
  const pollMs = requireInt4(o.pollMs ?? 1000, 'pollMs', 1);
  while (!o.signal?.aborted) {
    const armed = listener.arm(id, pollMs, o.signal);
    const page = await store.read(id, from, 200);
    if (!page) throw new RunNotFoundError(id);
    for (const e of page.entries) {
      if (o.signal?.aborted) return;
      yield e;
      from = e.seq;
    }
    if (page.entries.length === 200) continue;
    if (TERMINAL_STATUSES.includes(page.status)) return;
    await armed;
  }
}

/** Reads and follows runs' streams, for `RunRepository` and the SSE helpers. @internal */
@Injectable()
export class RunStreamReader {
  constructor(
    private readonly store: StreamStore,
    private readonly listener: StreamListener,
  ) {}

  read(id: string, q?: StreamQuery): Promise<StreamEntry[]> {
    return readStream(this.store, id, q);
  }

  watch(id: string, o?: WatchOptions): AsyncGenerator<StreamEntry, void, undefined> {
    return watchStream(this.store, this.listener, id, o);
  }
}
