import type { ActiveRun } from './active-run';
import { CallAbandonedError } from '../errors/call-abandoned.error';
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
  // Waits still pending are dropped (a race's loser); calls still live finish and are recorded, within
  // `worker.lateCallGraceMs` (then abandoned, see lateCalls).
  run.board.close();
  const settled = (async () => {
    await run.control.calls.settled();
    await run.control.settled(STOP_GRACE_MS);
  })();
  await lateCalls(run, settled);
  await settled;
  return end;
}

/**
 * Calls still live once the phase's code returned (a race's loser, a call the code stopped awaiting)
 * are waited for `worker.lateCallGraceMs`; then each body still running is abandoned with
 * CallAbandonedError (its signal fires, its gate refuses, a step records that failure at its index, a
 * command stays in doubt) and the run goes on to its end. A run that stopped meanwhile abandons its
 * bodies as any stop does (`STOP_GRACE_MS`).
 */
async function lateCalls(run: ActiveRun, settled: Promise<void>): Promise<void> {
  const graceMs = run.options.worker.lateCallGraceMs;
  let timer: NodeJS.Timeout | undefined;
  const late = await Promise.race([
    settled.then(() => false),
    new Promise<boolean>((r) => (timer = setTimeout(() => r(true), graceMs))),
  ]);
  clearTimeout(timer);
  if (late && !run.control.stop) run.control.abandonAll((name) => new CallAbandonedError(name, graceMs));
}
