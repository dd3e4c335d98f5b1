import { Injectable, OnApplicationShutdown } from '@nestjs/common';
import { DurableDatabase } from './durable-database';
import { WakeListener } from './wake-listener';

/**
 * The process's LISTEN connection on `durable_execution_done`, or the schema's own done channel (runs
 * marked by `RunReadStore.awaitOutcome` are announced there when they end), quiet about lost
 * connections: it reconnects by itself, closed at shutdown. @internal
 */
@Injectable()
export class RunEndListener implements OnApplicationShutdown {
  private listener?: WakeListener;
  private ready?: Promise<void>;

  constructor(private readonly db: DurableDatabase) {}

  /**
   * Opens the connection on the first call, which gives `onEnd`: it is called with each announced run
   * id, and with none after every (re)connect (announcements sent while it was away are lost). Resolves
   * once the connection is up; later calls only wait for that.
   */
  listen(onEnd: (runId?: string) => void): Promise<void> {
    this.ready ??= new Promise<void>((resolve) => {
      this.listener = new WakeListener(
        this.db.listenConfig, // direct (database.directUrl): never a pooled connection
        this.db.names.doneChannel,
        (runId) => {
          resolve();
          onEnd(runId);
        },
        true,
      );
      this.listener.start();
    });
    return this.ready;
  }

  async onApplicationShutdown(): Promise<void> {
    await this.listener?.stop();
  }
}
