import { RunNotFoundError } from '../errors/run-not-found.error';
import { TERMINAL_STATUSES } from '../interfaces/run.interface';
import type { StreamEntry } from '../interfaces/stream.interface';
import type { StreamListener } from '../store/stream-listener';
import { STREAM_PAGE_BYTES, StreamPage, StreamStore } from '../store/stream.store';

/** The most entries one read of a followed stream returns (besides STREAM_PAGE_BYTES of data). */
const FOLLOW_PAGE = 1000;

/**
 * The bytes of entries (data as JSON text) a run's shared reader holds for one follower that has not
 * taken them yet. A follower that holds more than this when the next page comes, while it has not taken
 * the previous one, is detached: what it holds is dropped and it reads on its own, at its own pace, from
 * its last entry, and joins the shared reader again once it has caught up.
 */
export const FOLLOWER_WINDOW_BYTES = 2 * STREAM_PAGE_BYTES;

/** One watcher of a run's stream, as the shared reader sees it. */
interface Follower {
  /** The seq of the last entry handed to the watcher. */
  cursor: number;
  pollMs: number;
  queue: StreamEntry[];
  sizes: number[];
  /** Index of the next entry of `queue` to hand over. */
  at: number;
  bytes: number;
  state: 'attached' | 'detached' | 'ended' | 'failed';
  error?: unknown;
  wake?: () => void;
}

/**
 * The reader of one run's stream in this process: one wait for its NOTIFY, one read per wake-up (or per
 * page, at the pace of its fastest follower), each entry handed to every attached follower. `pos`: it
 * has read every entry up to it.
 */
class RunFeed {
  readonly followers = new Set<Follower>();
  private readonly stop = new AbortController();
  private hungry?: () => void;

  constructor(
    private readonly hub: StreamFanout,
    readonly runId: string,
    public pos: number,
  ) {}

  add(f: Follower): void {
    f.state = 'attached';
    this.followers.add(f);
  }

  remove(f: Follower): void {
    if (!this.followers.delete(f)) return;
    if (!this.followers.size) this.close();
    this.poke();
  }

  /** A follower has taken every entry it was given: a page that waits for one may be read. */
  poke(): void {
    this.hungry?.();
  }

  async loop(): Promise<void> {
    try {
      while (this.followers.size) {
        const pollMs = Math.min(...[...this.followers].map((f) => f.pollMs));
        const armed = this.hub.listener.arm(this.runId, pollMs, this.stop.signal);
        const page = await this.hub.store.read(this.runId, this.pos, FOLLOW_PAGE);
        if (!page) throw new RunNotFoundError(this.runId);
        this.dispatch(page);
        if (!page.more && TERMINAL_STATUSES.includes(page.status)) return this.finish('ended');
        await (page.more ? this.untilHungry() : armed);
      }
    } catch (err) {
      this.finish('failed', err);
    }
  }

  private dispatch(page: StreamPage): void {
    const last = page.entries[page.entries.length - 1];
    if (!last) return;
    for (const f of [...this.followers]) {
      const had = f.at < f.queue.length;
      page.entries.forEach((e, i) => {
        if (e.seq <= f.cursor) return;
        f.queue.push(e);
        f.sizes.push(page.sizes[i]);
        f.bytes += page.sizes[i];
      });
      if (had && f.bytes > FOLLOWER_WINDOW_BYTES) {
        // Too far behind: drop what it holds; it reads on its own from its last entry.
        Object.assign(f, { queue: [], sizes: [], at: 0, bytes: 0, state: 'detached' });
        this.followers.delete(f);
      }
      f.wake?.();
    }
    this.pos = Math.max(this.pos, last.seq);
    if (!this.followers.size) this.close();
  }

  /** Resolves once a follower has taken all it holds (or none is left). */
  private untilHungry(): Promise<void> {
    return new Promise<void>((resolve) => {
      const check = () => {
        if (this.followers.size && ![...this.followers].some((f) => f.at >= f.queue.length)) return;
        this.hungry = undefined;
        resolve();
      };
      this.hungry = check;
      check();
    });
  }

  private finish(state: 'ended' | 'failed', error?: unknown): void {
    this.close();
    for (const f of this.followers) {
      f.state = state;
      f.error = error;
      f.wake?.();
    }
    this.followers.clear();
  }

  private close(): void {
    this.stop.abort();
    this.hungry?.();
    this.hub.forget(this);
  }
}

/**
 * Every watch of this process's runs' streams: the watchers of one run share one reader (`RunFeed`)
 * that waits for the run's NOTIFY and reads each new entry once for all of them. A watcher that starts
 * behind that reader (it resumes from an older seq) first reads its backlog on its own, page by page as
 * it takes them, then joins it. @internal
 */
export class StreamFanout {
  private readonly feeds = new Map<string, RunFeed>();

  constructor(
    readonly store: StreamStore,
    readonly listener: StreamListener,
  ) {}

  forget(feed: RunFeed): void {
    if (this.feeds.get(feed.runId) === feed) this.feeds.delete(feed.runId);
  }

  /** The followers of each run read here and the bytes the shared readers hold for them. For tests. */
  held(runId: string): number[] {
    return [...(this.feeds.get(runId)?.followers ?? [])].map((f) => f.bytes);
  }

  /** Every entry after `from`, in order, each once; ends with the run (see `watchStream`). */
  async *follow(
    runId: string,
    from: number,
    pollMs: number,
    signal?: AbortSignal,
  ): AsyncGenerator<StreamEntry, void, undefined> {
    const f: Follower = { cursor: from, pollMs, queue: [], sizes: [], at: 0, bytes: 0, state: 'detached' };
    let feed: RunFeed | undefined;
    const onAbort = () => f.wake?.();
    signal?.addEventListener('abort', onAbort);
    try {
      while (!signal?.aborted) {
        feed = this.feeds.get(runId);
        if (!feed) {
          feed = new RunFeed(this, runId, f.cursor);
          this.feeds.set(runId, feed);
          feed.add(f);
          void feed.loop();
        } else if (feed.pos <= f.cursor) {
          feed.add(f);
        } else {
          // Behind the shared reader: read on its own, as it takes the entries.
          const armed = this.listener.arm(runId, pollMs, signal);
          const page = await this.store.read(runId, f.cursor, FOLLOW_PAGE);
          if (!page) throw new RunNotFoundError(runId);
          for (const e of page.entries) {
            if (signal?.aborted) return;
            yield e;
            f.cursor = e.seq;
          }
          if (page.more) continue;
          if (TERMINAL_STATUSES.includes(page.status)) return;
          const now = this.feeds.get(runId);
          // Caught up with the database, still behind the reader (it read entries written since): wait.
          if (now && now.pos > f.cursor) await armed;
          continue;
        }
        // Attached: take what the shared reader hands over.
        for (;;) {
          while (f.at < f.queue.length) {
            const e = f.queue[f.at];
            f.bytes -= f.sizes[f.at];
            f.at++;
            if (f.at >= 256 && f.at * 2 >= f.queue.length) {
              f.queue = f.queue.slice(f.at);
              f.sizes = f.sizes.slice(f.at);
              f.at = 0;
            }
            if (e.seq <= f.cursor) continue;
            if (signal?.aborted) return;
            yield e;
            f.cursor = e.seq;
          }
          f.queue = [];
          f.sizes = [];
          f.at = 0;
          if (f.state === 'failed') throw f.error;
          if (f.state === 'ended' || signal?.aborted) return;
          if (f.state === 'detached') break;
          await new Promise<void>((resolve) => {
            f.wake = resolve;
            feed!.poke();
          });
          f.wake = undefined;
        }
      }
    } finally {
      signal?.removeEventListener('abort', onAbort);
      if (f.state === 'attached') feed?.remove(f);
    }
  }
}
