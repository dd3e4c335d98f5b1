import { Logger } from '@nestjs/common';

/**
 * A background sweep on a plain interval timer owned by its service (no @nestjs/schedule): a tick that
 * comes while the previous one still runs is skipped, a tick that fails is logged as a warning (the next
 * one retries), and `stop` clears the timer and waits for the tick in progress. @internal
 */
export class IntervalTask {
  private readonly logger = new Logger('DurableExecution');
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;

  /**
   * @param name what failed, in the warning (`<name> failed (will retry): <message>`)
   * @param tick one sweep
   */
  constructor(
    private readonly name: string,
    private readonly tick: () => Promise<void>,
  ) {}

  /** Whether the timer is armed (between `start` and `stop`). */
  get started(): boolean {
    return this.timer !== undefined;
  }

  /**
   * Arms the timer. `keepAlive: false` unrefs it: the task never keeps a process alive on its own;
   * `true` is for a task a process may live on (it is cleared by `stop`).
   */
  start(intervalMs: number, { keepAlive }: { keepAlive: boolean }): void {
    this.timer = setInterval(() => void this.safeTick(), intervalMs);
    if (!keepAlive) this.timer.unref();
  }

  /** Clears the timer; resolves once a tick in progress has ended. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
  }

  private safeTick(): Promise<void> {
    if (this.running) return this.running;
    this.running = this.tick()
      .catch((err) => this.logger.warn(`${this.name} failed (will retry): ${(err as Error).message}`))
      .finally(() => (this.running = undefined));
    return this.running;
  }
}
