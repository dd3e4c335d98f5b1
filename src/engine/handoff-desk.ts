import type { Logger } from '@nestjs/common';
import { randomInt } from 'node:crypto';
import type { ClaimBatch, ClaimedRun, ClaimOffer } from '../store/run-state/claim-runs';
import type { RunStateStore } from '../store/run-state/run-state.store';
import type { ResolvedDurableOptions } from '../options/durable-execution-options.interface';
import type { DurableRegistry } from './durable.registry';

/** How long the id of a run handed here is remembered: its NOTIFY and a claim's list may both name it. */
const SEEN_MS = 10 * 60_000;

/**
 * The worker's side of the hand-off (docs/ARCHITECTURE.md, "Hand-off"). Its claims offer its room to
 * starts (handoff-offer.ts) and this keeps the slots offered out of what its own claims take
 * (`reserved`), so starts and claims together never exceed its concurrency. A start that takes a slot
 * NOTIFYs `$handoff:<run>:<token>:<worker>`; the run begins here with a read of its row (no commit), as
 * a claimed run at epoch 1 under the hand-off's short lease. A hand-off heard while a claim is on its
 * way waits for the claim's answer (which resets `reserved` and lists the runs handed meanwhile);
 * each run begins once. A stopping worker offers nothing more and hands back what it has not begun.
 * @internal
 */
export class HandoffDesk {
  /** Slots offered by the last claim, or taken by a start whose run has not begun here yet. */
  private reserved = 0;
  /** Handed runs being read: they count as in flight. */
  private readonly reading = new Set<string>();
  /** Handed runs already taken (by id, when), so a run named twice begins once. */
  private readonly seen = new Map<string, number>();
  /** Hand-offs heard while a claim was on its way: settled after its answer. */
  private heardDuringClaim: string[] | null = null;
  /** The claim on its way writes the row (offers, or withdraws and offers anew). */
  private rewrites = false;
  /** The last claim found as many due runs as it could take. */
  private queue = false;
  private closed = false;
  /** This process's token: a later process with the same worker id does not take these hand-offs. */
  readonly token = randomInt(1, 2 ** 31 - 1);

  constructor(
    private readonly store: Pick<RunStateStore, 'readHandoff' | 'closeHandoffs'>,
    private readonly workerId: string,
    /** Slots a claim may offer: the worker's concurrency, or 0 when it takes no hand-off. */
    private readonly slots: () => number,
    /** The worker's room: its concurrency minus the runs it drives (this desk's counts not included). */
    private readonly room: () => number,
    /** Begins a handed run as a claimed one (in flight from then on). */
    private readonly begin: (claim: ClaimedRun) => void,
    private readonly logger: Logger,
  ) {}

  /** What counts against the worker's concurrency besides its runs: slots kept for starts, runs being read. */
  get held(): number {
    return this.reserved + this.reading.size;
  }

  /**
   * The hand-off's part of a claim about to be sent, which may take `free` runs of its own. Most claims
   * leave the row alone (no lock, no write: an idle claim stays read-only): those of a worker whose
   * offer still covers its room. One writes it when the worker offers nothing yet (and finds itself
   * idle), or withdraws and offers anew (under the row's lock) when its slots reserved are no more than
   * its own room (half its room is offered or less), leave it no room at all (a run a claim could take
   * waits for them), or when the last claim found a queue.
   */
  claiming(free: number): ClaimOffer {
    this.heardDuringClaim ??= [];
    const slots = this.closed ? 0 : this.slots();
    const r = this.reserved;
    this.rewrites = r > 0 ? free <= 0 || this.queue || r <= free : slots > 0;
    if (!this.rewrites) return { offer: 0, reserved: 0, token: this.token };
    return { offer: slots, reserved: r, token: this.token };
  }

  /**
   * The claim's answer (null: it failed, nothing changed): the slots offered now and the runs handed
   * meanwhile (when it wrote the row), and whether it found as many due runs as it could take.
   */
  claimed(batch: Pick<ClaimBatch, 'offered' | 'handed' | 'runs'> | null, limit = 0): void {
    const heard = this.heardDuringClaim ?? [];
    this.heardDuringClaim = null;
    if (batch && this.rewrites) {
      this.reserved = batch.offered;
      // Handed from the slots this claim withdrew: outside `reserved` now.
      for (const id of batch.handed) this.take(id, false);
    }
    if (batch) this.queue = limit > 0 && batch.runs.length >= limit;
    for (const id of heard) this.take(id, true);
  }

  /** The last claim found as many due runs as it could take while slots stay reserved: claim again. */
  get withdrawNext(): boolean {
    return this.queue && this.reserved > 0;
  }

  /**
   * A NOTIFY of the wake channel: a hand-off (true), taken when it names this process; any other
   * payload is not one (false).
   */
  heard(payload: string | undefined): boolean {
    // A reconnect (no payload): a NOTIFY may have been lost; the next claim reads the row's list.
    if (payload === undefined) this.queue = true;
    if (!payload?.startsWith('$handoff:')) return false;
    const [, runId, token, ...worker] = payload.split(':');
    if (worker.join(':') !== this.workerId || Number(token) !== this.token) return true;
    if (this.heardDuringClaim) this.heardDuringClaim.push(runId);
    else this.take(runId, true);
    return true;
  }

  /**
   * Begins a handed run once. One heard by NOTIFY took one of the slots offered (`reserved`); without
   * one left it begins only with room to spare (else its hand-off lease lapses and the reconciler gives
   * it back, its attempt uncounted).
   */
  private take(runId: string, notified: boolean): void {
    if (this.closed || this.seen.has(runId)) return;
    const now = Date.now();
    for (const [id, at] of this.seen) {
      if (now - at < SEEN_MS) break;
      this.seen.delete(id);
    }
    this.seen.set(runId, now);
    if (notified) {
      if (this.reserved > 0) this.reserved--;
      else if (this.room() - this.held <= 0) return;
    }
    void this.read(runId);
  }

  private async read(runId: string): Promise<void> {
    this.reading.add(runId);
    try {
      const claim = await this.store.readHandoff(runId, this.workerId);
      // A stopping worker drives it too: it stops at its first boundary and is handed back.
      if (claim) this.begin(claim);
    } catch (err) {
      this.logger.warn(
        `could not read run ${runId} handed to worker ${this.workerId} (${(err as Error).message}); the reconciler takes it back when its hand-off lease ends`,
      );
    } finally {
      this.reading.delete(runId);
    }
  }

  /**
   * The worker stops: once the claim on its way (`claiming`) has ended, no slot offered any more, and the
   * runs handed to it and not begun (not in `keep()`, not being read) handed back, pending again.
   */
  async close(claiming: Promise<unknown> | null, keep: () => string[]): Promise<void> {
    this.closed = true;
    try {
      await claiming;
      this.reserved = 0;
      const n = await this.store.closeHandoffs(this.workerId, () => [...keep(), ...this.reading]);
      if (n) this.logger.log(`worker ${this.workerId} handed back ${n} run(s) a start handed it, not begun`);
    } catch (err) {
      this.logger.warn(`hand-offs not handed back (their hand-off leases lapse): ${(err as Error).message}`);
    }
  }
}

/**
 * The desk of a worker: it offers slots only on its schedule (it listens, and has a presence row), and
 * only for kinds it takes by hand-off (`handoffKinds`). `room`: concurrency minus the runs it drives.
 * @internal
 */
export function workerDesk(
  store: Pick<RunStateStore, 'readHandoff' | 'closeHandoffs'>,
  options: ResolvedDurableOptions,
  registry: Pick<DurableRegistry, 'kinds' | 'getWorkflow'>,
  room: () => number,
  begin: (claim: ClaimedRun) => void,
  logger: Logger,
): HandoffDesk {
  const w = options.worker;
  const slots = () => (w.enabled && handoffKinds(registry, w.handoffLeaseMs).length ? w.concurrency : 0);
  return new HandoffDesk(store, w.workerId, slots, room, begin, logger);
}

/**
 * The kinds a start may hand to this worker: those whose declaration (kind-wide options are its newest
 * version's) has no concurrency or rate limit and no debounce; none when `leaseMs` is 0.
 * @internal
 */
export function handoffKinds(
  registry: Pick<DurableRegistry, 'kinds' | 'getWorkflow'>,
  leaseMs: number,
): string[] {
  if (leaseMs <= 0) return [];
  return registry.kinds().filter((kind) => {
    const m = registry.getWorkflow(kind)?.meta;
    return !!m && !(m.concurrency || m.perKeyConcurrency || m.rateLimit || m.debounce);
  });
}
