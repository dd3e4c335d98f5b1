import { Injectable, OnApplicationShutdown } from '@nestjs/common';
import { DONE_CHANNEL } from '../durable-execution.constants';
import { DurableDatabase } from '../store/durable-database';
import { WakeListener } from '../engine/wake-listener';

/**
 * Waits for runs to end through NOTIFY on `durable_execution_done`: one LISTEN connection per process,
 * opened on the first wait. After a reconnect every waiter re-checks (notifications sent while the
 * connection was away are lost). @internal
 */
@Injectable()
export class RunResultWaiter implements OnApplicationShutdown {
  private listener?: WakeListener;
  private ready?: Promise<void>;
  private readonly waiters = new Map<string, Set<() => void>>();

  constructor(private readonly db: DurableDatabase) {}

  /** Resolves once the LISTEN connection is up (notifications from then on are seen). */
  listen(): Promise<void> {
    this.ready ??= new Promise<void>((resolve) => {
      this.listener = new WakeListener(
        this.db.pool.options,
        DONE_CHANNEL,
        (runId) => {
          resolve();
          this.wake(runId);
        },
        true,
      );
      this.listener.start();
    });
    return this.ready;
  }

  /** Resolves when `runId` is announced (or the connection came back), or after `ms`. */
  next(runId: string, ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const set = this.waiters.get(runId) ?? new Set();
      this.waiters.set(runId, set);
      const done = () => {
        clearTimeout(timer);
        set.delete(done);
        if (!set.size) this.waiters.delete(runId);
        resolve();
      };
      const timer = setTimeout(done, ms);
      set.add(done);
    });
  }

  private wake(runId: string | undefined): void {
    const targets = runId ? [this.waiters.get(runId)] : [...this.waiters.values()];
    for (const set of targets) for (const done of [...(set ?? [])]) done();
  }

  async onApplicationShutdown(): Promise<void> {
    await this.listener?.stop();
  }
}
