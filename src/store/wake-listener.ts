import { Logger } from '@nestjs/common';
import { Client, ClientConfig } from 'pg';
import { listenConfigFor } from './direct-connection';
import { engineOwned } from './pg-wire-hook';

/**
 * A dedicated LISTEN connection that calls `onWake` on every NOTIFY of `channel`. It reconnects by
 * itself with backoff (a PostgreSQL restart or a killed backend never crashes the process), and
 * nudges once after reconnecting, since notifications sent while it was away are lost. Given a pool's
 * config, it connects where the pool's DurableDatabase routes LISTEN connections (`database.directUrl`):
 * a LISTEN on a pooled connection in transaction mode would be dropped with the transaction.
 * @internal
 */
export class WakeListener {
  private readonly logger = new Logger('DurableExecution');
  private client?: Client;
  private stopped = false;
  private retryMs = 250;
  private timer?: NodeJS.Timeout;

  constructor(
    private readonly config: ClientConfig,
    private readonly channel: string,
    /** Called with the payload of each NOTIFY, and with no payload after (re)connecting. */
    private readonly onWake: (payload?: string) => void,
    /** Quiet: no warning on a lost connection (a waiter, not the worker). */
    private readonly quiet = false,
  ) {}

  start(): void {
    void this.connect();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.client?.end().catch(() => undefined);
  }

  private async connect(): Promise<void> {
    if (this.stopped) return;
    const client = new Client(listenConfigFor(this.config));
    engineOwned(client); // never checked against a user's call gate (the fenced transport)
    this.client = client;
    client.on('error', (err) => this.lost(client, err));
    client.on('end', () => this.lost(client));
    client.on('notification', (n) => this.onWake(n.payload));
    try {
      await client.connect();
      await client.query(`listen ${this.channel}`);
      this.retryMs = 250;
      this.onWake();
    } catch (err) {
      this.lost(client, err as Error);
    }
  }

  private lost(client: Client, err?: Error): void {
    if (this.stopped || client !== this.client) return;
    this.client = undefined;
    client.end().catch(() => undefined);
    if (err && !this.quiet)
      this.logger.warn(`wake-up connection lost (${err.message}); reconnecting in ${this.retryMs} ms`);
    this.timer = setTimeout(() => void this.connect(), this.retryMs);
    this.timer.unref();
    this.retryMs = Math.min(this.retryMs * 2, 10_000);
  }
}
