import { performance } from 'node:perf_hooks';
import { LeaseLostError } from '../errors/lease-lost.error';
import type { RunControl } from './run-control';

/**
 * A claim's local, monotonic view of its lease: a deadline on `performance.now()`, taken from the send
 * time of the claim, of every fenced write and of every heartbeat. Nothing leaves the process unless
 * the lease is known to hold for a margin, else it is re-confirmed by a fenced statement, or the run
 * stops.
 * @internal
 */
export class LeaseClock {
  private deadline: number;

  constructor(
    private readonly runId: string,
    private readonly epoch: number,
    claimSentAt: number,
    private readonly ttlMs: number,
    private readonly control: RunControl,
    private readonly renew: () => Promise<{ alive: boolean; cancelRequested: boolean }>,
  ) {
    this.deadline = claimSentAt + ttlMs;
  }

  /** A renewal of this lease was sent at `sentAt` (performance.now()) and succeeded. */
  renewed(sentAt: number): void {
    this.deadline = Math.max(this.deadline, sentAt + this.ttlMs);
  }

  /** When the lease ends at the latest, by this process's clock (for the fencing token of a command). */
  expiresAt(): Date {
    return new Date(Date.now() + (this.deadline - performance.now()));
  }

  /**
   * Called right before anything leaves the process (a step body, a command, a lookup): the lease
   * must hold for at least a third of its TTL by the local monotonic clock, or be re-confirmed by a
   * fenced statement. A process that wakes past its lease (a freeze, a GC pause) stops here.
   */
  ensure(what: string): Promise<void> | undefined {
    if (this.holdsWithMargin()) {
      this.control.checkActive(false);
      return undefined; // the common case: no promise, no await
    }
    return this.renewBeforeCall(what);
  }

  /** At least a third of the TTL left by this process's monotonic clock. */
  private holdsWithMargin(): boolean {
    return performance.now() < this.deadline - this.ttlMs / 3;
  }

  /** Renews (fenced) until the margin holds again; two renewals that still leave it short mean lost. */
  private async renewBeforeCall(what: string): Promise<void> {
    for (let tries = 0; !this.holdsWithMargin(); tries++) {
      if (this.control.error) throw this.control.error;
      const sentAt = performance.now();
      const { alive, cancelRequested } =
        tries < 2 ? await this.renew() : { alive: false, cancelRequested: false };
      if (!alive) {
        const error = new LeaseLostError(this.runId, this.epoch, `the lease check before ${what}`);
        throw this.control.halt({ kind: 'lease-lost', error });
      }
      if (cancelRequested) this.control.cancelRequested = true;
      this.renewed(sentAt);
    }
    this.control.checkActive(false);
  }
}
