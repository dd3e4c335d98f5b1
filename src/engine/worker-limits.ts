import { Injectable } from '@nestjs/common';
import { LimitsStore } from '../store/limits.store';
import type { ClaimBatch, ClaimOffer } from '../store/run-state/claim-runs';
import { RunStateStore } from '../store/run-state/run-state.store';
import { DurableRegistry } from './durable.registry';

/**
 * The concurrency limits of the kinds this worker runs (the `concurrency` and `perKeyConcurrency`
 * options of their workflows), declared in the database before its first claim: a claim that ran
 * before would not know them. @internal
 */
@Injectable()
export class WorkerLimits {
  private declared = false;

  constructor(
    private readonly registry: DurableRegistry,
    private readonly store: LimitsStore,
    private readonly runs: RunStateStore,
  ) {}

  /**
   * The worker's claim: declares the limits first (once), then claims up to `free` runs of the kinds
   * registered here, of the versions registered here, never one still in flight here, taking slots
   * when a kind has a limit, and withdrawing and offering the worker's hand-off slots (`handoff`).
   */
  async claim(workerId: string, free: number, inFlight: string[], handoff?: ClaimOffer): Promise<ClaimBatch> {
    await this.ready();
    const kinds = this.registry.kinds();
    const inFlightIds = [...new Set(inFlight)];
    const versions = this.registry.kindVersions();
    return this.runs.claim(workerId, kinds, free, inFlightIds, this.limited, versions, handoff);
  }

  /** A kind this worker runs has a limit: its claims take slots. */
  get limited(): boolean {
    return this.registry.kinds().some((k) => {
      const m = this.registry.getWorkflow(k)?.meta;
      return !!(m?.concurrency || m?.perKeyConcurrency || m?.rateLimit);
    });
  }

  /** Declares the limits once (a failure throws, and the next claim round tries again). */
  async ready(): Promise<void> {
    if (this.declared) return;
    await this.store.declare(
      this.registry.kinds().map((kind) => {
        const meta = this.registry.getWorkflow(kind)!.meta;
        return {
          kind,
          kindCap: meta.concurrency ?? null,
          keyCap: meta.perKeyConcurrency ?? null,
          rate: meta.rateLimit
            ? {
                limit: meta.rateLimit.limit,
                periodMs: meta.rateLimit.periodMs,
                perKey: !!meta.rateLimit.perKey,
              }
            : null,
          holdWhileWaiting: !!meta.holdSlotWhileWaiting,
        };
      }),
    );
    this.declared = true;
  }
}
