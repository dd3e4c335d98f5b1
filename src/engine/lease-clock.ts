import { performance } from 'node:perf_hooks';
import { LeaseLostError } from '../errors/lease-lost.error';
import type { RunControl } from './run-control';
import { installFencedTransport } from './wire/fenced-transport';
import { currentGate, WireGate } from './wire/wire-gate';

/**
 * A claim's local, monotonic view of its lease: a deadline on `performance.now()`, taken from the send
 * time of the claim, of every fenced write and of every heartbeat. Nothing leaves the process unless
 * the lease is known to hold for a margin, else it is re-confirmed by a fenced statement, or the run
 * stops.
 * @internal
 */
export class LeaseClock {
  private deadline: number;
  /** Fires at the deadline: a lease not renewed by then stops the run at once (ctx.signal aborts). */
  private timer: NodeJS.Timeout | null = null;
  /**
   * How long the lease held now was granted for: `ttlMs`, or a hand-off's shorter lease until the first
   * renewal (the margins are a third of it, so a handed run begins at once without renewing first).
   */
  private span: number;
  /** A hand-off's lease not renewed by a write within a third of it is renewed by this timer. */
  private early: NodeJS.Timeout | null = null;

  constructor(
    private readonly runId: string,
    private readonly epoch: number,
    /** When the claim was sent (`performance.now()`), and for a hand-off the lease it got then. */
    claim: number | { sentAt: number; leaseMs?: number },
    private readonly ttlMs: number,
    private readonly control: RunControl,
    private readonly renew: () => Promise<{ alive: boolean; cancelRequested: boolean }>,
    /** The fenced transport (null: off): how long before the deadline a request may no longer leave. */
    private readonly wireMarginMs: number | null = null,
  ) {
    const { sentAt, leaseMs } = typeof claim === 'number' ? { sentAt: claim, leaseMs: undefined } : claim;
    this.span = Math.min(leaseMs ?? ttlMs, ttlMs);
    this.deadline = sentAt + this.span;
    this.arm();
    if (this.span < ttlMs) {
      this.early = setTimeout(() => void this.renewEarly(), this.span / 3);
      this.early.unref();
    }
  }

  /** A hand-off's short lease, still not renewed by a write: renewed now (fenced), to the full TTL. */
  private async renewEarly(): Promise<void> {
    this.early = null;
    if (this.span >= this.ttlMs || this.control.stop) return;
    const sentAt = performance.now();
    try {
      const { alive, cancelRequested } = await this.renew();
      if (!alive) {
        const error = new LeaseLostError(this.runId, this.epoch, 'the renewal of a hand-off lease');
        this.control.halt({ kind: 'lease-lost', error });
        return;
      }
      if (cancelRequested) this.control.cancelRequested = true;
      this.renewed(sentAt);
    } catch {
      // The store failure stopped the run (storeFailed); else the deadline timer does.
    }
  }

  /**
   * One timer per claim, never re-armed on a renewal: when it fires before the (moved) deadline it is
   * set again for the rest. When the deadline has passed with no renewal, the lease is taken as lost
   * (another worker may claim the run once the database's copy of it ends, which is never earlier):
   * the run stops as on a lost lease, so `ctx.signal` aborts what it was passed to without waiting
   * for a heartbeat's answer (a worker cut off from PostgreSQL while its targets are reachable).
   */
  private arm(): void {
    const left = this.deadline - performance.now();
    if (left > 0) {
      this.timer = setTimeout(() => this.arm(), left + 1);
      this.timer.unref();
      return;
    }
    this.timer = null;
    const error = new LeaseLostError(
      this.runId,
      this.epoch,
      this.span < this.ttlMs
        ? 'the hand-off lease deadline (no write or renewal within handoffLeaseMs)'
        : 'the lease deadline (no renewal within leaseTtlMs)',
    );
    this.control.halt({ kind: 'lease-lost', error });
  }

  /** The claim is over: its deadline timer is cleared. */
  close(): void {
    if (this.timer) clearTimeout(this.timer);
    if (this.early) clearTimeout(this.early);
    this.timer = this.early = null;
  }

  /**
   * The gate of one call (a command or step body) for the fenced transport, or undefined when it is
   * off. End it when the call settles.
   */
  gate(label: string): WireGate | undefined {
    if (this.wireMarginMs === null) return undefined;
    installFencedTransport(); // once per process
    return new WireGate((what) => this.wireCheck(what), label);
  }

  /**
   * The check where a request's bytes are handed to the socket: synchronous (it cannot renew), against
   * the hard deadline minus the wire margin. A lease not known to hold stops the run as a lost lease
   * does, and the request is aborted: it never left, so nothing is recorded as the call's outcome.
   */
  private wireCheck(what: () => string): Error | undefined {
    return this.check(what, this.wireMargin);
  }

  /** The wire margin (a tenth of the TTL without the fenced transport), at most a third of the lease held. */
  private get wireMargin(): number {
    return Math.min(this.wireMarginMs ?? this.ttlMs / 10, this.span / 3);
  }

  /**
   * `ctx.assertLease()`: inside a gated call, the call's wire check; then (outside one: in the workflow
   * body, or with the fenced transport off) the same test on this lease, against the wire margin (a
   * tenth of the lease when the transport is off). Throws the error the run stopped with.
   */
  assertHeld(what: string): void {
    const refused = currentGate()?.check(what) ?? this.check(() => what, this.wireMargin);
    if (refused) throw refused;
  }

  private check(what: () => string, marginMs: number): Error | undefined {
    if (this.control.stop?.kind === 'lease-lost') return this.control.error ?? undefined;
    if (performance.now() < this.deadline - marginMs) return undefined;
    return this.control.halt({
      kind: 'lease-lost',
      error: new LeaseLostError(this.runId, this.epoch, what()),
    });
  }

  /** A renewal of this lease was sent at `sentAt` (performance.now()) and succeeded. */
  renewed(sentAt: number): void {
    this.deadline = Math.max(this.deadline, sentAt + this.ttlMs);
    this.span = this.ttlMs;
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

  /** At least a third of the lease held (the TTL, or a hand-off's) left by this process's monotonic clock. */
  private holdsWithMargin(): boolean {
    return performance.now() < this.deadline - this.span / 3;
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
