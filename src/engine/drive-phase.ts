import type { ActiveRun } from './active-run';
import { STOP_GRACE_MS } from './live-calls';

/** How a phase's code (`run()` or `onCancel()`) ended: its return value or what it threw. @internal */
export type PhaseEnd = { output: unknown } | { error: unknown };

/**
 * Runs one phase of a workflow (`run()`, or the cleanup `onCancel()`) in the run's async-local frame,
 * and resolves once no call of it is live. A call still live when the code returned was never awaited:
 * its outcome would be lost (and replay could not place it), so the run stops with a usage error
 * (DanglingCallError). Nothing is written while a call of this run is live: no handover, no finish.
 * @internal
 */
export async function drivePhase(run: ActiveRun, body: () => unknown): Promise<PhaseEnd> {
  // A park (or a drain, a release) leaves the workflow's code waiting for ever (see `handed`): the phase
  // ends when the run stops so, with the stop's error, and the code's frame is dropped.
  const end: PhaseEnd = await Promise.race([
    run.execute(body).then(
      (output) => ({ output }),
      (error: unknown) => ({ error }),
    ),
    run.control.suspended.then(() => ({ error: run.control.error })),
  ]);
  // A step's commit held now (or by a call still live) rides on the finish (HeldStep).
  run.held.phaseEnded = true;
  // Waits still pending are dropped (a race's loser); calls still live finish and are recorded.
  run.board.close();
  await run.control.calls.settled();
  await run.control.settled(STOP_GRACE_MS);
  return end;
}
