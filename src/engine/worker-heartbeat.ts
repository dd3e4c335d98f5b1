import { performance } from 'node:perf_hooks';
import type { ClaimedRun } from '../store/run-state/claim-runs';
import type { RunStateStore } from '../store/run-state/run-state.store';
import type { ActiveRun } from './active-run';
import { crashPoint } from './crash-points';
import { heartbeatStop, HeartbeatStop } from './run-stop';

/**
 * The worker's heartbeat: renews the leases of every run it drives (`entries`, also those still being
 * prepared) in one statement; a run whose lease is gone or that was cancelled is stopped, or, not
 * prepared yet, stopped as soon as it is (`stopBeforeStart`, by `<run id>:<epoch>`).
 * @internal
 */
export async function renewLeases(
  store: Pick<RunStateStore, 'heartbeat'>,
  workerId: string,
  entries: Array<{ claim: ClaimedRun; run?: ActiveRun }>,
  stopBeforeStart: Map<string, HeartbeatStop>,
): Promise<void> {
  if (!entries.length) return;
  crashPoint('before-heartbeat');
  const sentAt = performance.now();
  const alive = await store.heartbeat(
    workerId,
    entries.map((f) => ({ id: f.claim.id, epoch: f.claim.epoch })),
  );
  for (const { claim, run } of entries) {
    // Rows come back only for the (id, epoch) pairs still owned: this claim's lease was renewed.
    const state = alive.get(claim.id);
    if (state && run) run.lease.renewed(sentAt);
    if (state?.hasSignals) run?.board.hint(); // a signal or a child's end, maybe for a pending wait
    const reason = heartbeatStop(claim, state);
    if (!reason) continue;
    if (!run) stopBeforeStart.set(`${claim.id}:${claim.epoch}`, reason);
    else {
      if (reason.kind === 'cancelled') run.control.cancelRequested = true;
      run.control.halt(reason);
    }
  }
}
