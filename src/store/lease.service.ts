import { Injectable } from '@nestjs/common';
import type { RunCursor } from '../interfaces/run.interface';
import type { ClaimedRun } from './run-state/claim-runs';
import type { CheckpointWrite, Fence } from './run-state/fence';
import type { FinishWrite } from './run-state/finish-run';
import { RunStateStore } from './run-state/run-state.store';

export type { ClaimedRun } from './run-state/claim-runs';
export type { CheckpointWrite, Fence } from './run-state/fence';
export type { FinishWrite } from './run-state/finish-run';

/**
 * Claims, heartbeats and the fenced writes of a run's lease, as the product names them: a thin facade
 * over {@link RunStateStore}, where each statement lives with the code that binds it. Each method is
 * one SQL statement; a fenced write that matches no row (a newer claim owns the run) throws
 * LeaseLostError and wrote nothing.
 */
@Injectable()
export class LeaseService {
  constructor(private readonly store: RunStateStore) {}

  /**
   * Claims up to `limit` due runs of `kinds` for `workerId` (SKIP LOCKED; raises epoch and attempts),
   * never one of `exclude` (runs this process still drives).
   */
  claim(workerId: string, kinds: string[], limit: number, exclude: string[] = []): Promise<ClaimedRun[]> {
    return this.store.claim(workerId, kinds, limit, exclude);
  }

  /** Extends the leases of all listed runs in one statement; returns the ids still owned. */
  heartbeat(
    workerId: string,
    runs: Array<{ id: string; epoch: number }>,
  ): Promise<Map<string, { cancelRequested: boolean }>> {
    return this.store.heartbeat(workerId, runs);
  }

  /** Renews one lease (fenced): `alive` false when the run is no longer this claim's. */
  renew(fence: Fence): Promise<{ alive: boolean; cancelRequested: boolean }> {
    return this.store.renew(fence);
  }

  /** The fenced step write: a commit (`progressMade`) or a `started` mark. */
  writeStep(
    fence: Fence,
    cursor: RunCursor,
    checkpoints: CheckpointWrite[],
    event: string,
    payload: Record<string, unknown>,
    progressMade: boolean,
  ): Promise<{ cancelRequested: boolean }> {
    return this.store.writeStep(fence, cursor, checkpoints, event, payload, progressMade);
  }

  /** Moves the intra-step cursor (ctx.progress), fenced. */
  progress(fence: Fence, cursor: RunCursor): Promise<{ cancelRequested: boolean }> {
    return this.store.progress(fence, cursor);
  }

  /** Leaves `running` (terminal, or `waiting` with a due time), fenced, with its event. */
  finish(fence: Fence, w: FinishWrite): Promise<void> {
    return this.store.finish(fence, w);
  }
}
