import { Injectable, OnApplicationShutdown } from '@nestjs/common';
import { DurableDatabase } from './durable-database';
import { WakeListener } from './wake-listener';

/**
 * The process's LISTEN connection on the stream channel (opened by the first watcher, closed at
 * shutdown): each NOTIFY of a run's new entry resolves the waits armed for that run; a (re)connect
 * resolves them all (what was sent while it was away is read again). @internal
 */
@Injectable()
export class StreamListener implements OnApplicationShutdown {
  private listener?: WakeListener;
  private readonly waiting = new Map<string, Set<() => void>>();

  constructor(private readonly db: DurableDatabase) {}

  /**
   * A wait for the next entry of `runId`, armed now (before the caller reads, so no entry written after
   * the read is missed): resolves on its NOTIFY, after `ms`, or when `signal` aborts.
   */
  arm(runId: string, ms: number, signal?: AbortSignal): Promise<void> {
    if (!this.listener) {
      this.listener = new WakeListener(
        this.db.listenConfig, // direct (database.directUrl): never a pooled connection
        this.db.names.streamChannel,
        (id) => this.wake(id),
        true,
      );
      this.listener.start();
    }
    return new Promise<void>((resolve) => {
      const set = this.waiting.get(runId) ?? new Set();
      this.waiting.set(runId, set);
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        set.delete(done);
        if (!set.size && this.waiting.get(runId) === set) this.waiting.delete(runId);
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal?.addEventListener('abort', done);
      set.add(done);
      if (signal?.aborted) done();
    });
  }

  private wake(runId?: string): void {
    const sets = runId === undefined ? [...this.waiting.values()] : [this.waiting.get(runId)];
    for (const set of sets) for (const done of [...(set ?? [])]) done();
  }

  async onApplicationShutdown(): Promise<void> {
    this.wake();
    await this.listener?.stop();
  }
}
