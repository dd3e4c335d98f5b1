import { LeaseLostError } from '../errors/lease-lost.error';
import { RunCancelledError } from '../errors/run-cancelled.error';
import type { FinishWrite } from '../store/run-state/finish-run';
import type { RunStateStore } from '../store/run-state/run-state.store';
import type { ActiveRun } from './active-run';
import { cancelInfo, CLEANUP_BASE, CLEANUP_MARKER, WorkflowInstance } from './cleanup-phase';
import type { RunStop } from './run-stop';
import { serializeError } from './serialize-error';
import { cursorAt } from './steps/step-env';
import { drivePhase } from './drive-phase';
import { stepFailuresIn } from './stored-error';

/**
 * How a cleanup attempt ended: the run ends cancelled (`write`), or the attempt stopped first
 * (`stop`: a drain, a lost lease, a command to retry later; the next claim resumes the cleanup), or
 * its start could not be recorded (`unrecorded`: the lease's expiry hands it on).
 * @internal
 */
export type CleanupEnd =
  { write: FinishWrite } | { stop: RunStop } | { lost: LeaseLostError } | { unrecorded: Error };

/**
 * The cleanup phase of a cancelled run: the marker written (fenced, carrying the values `run()` left
 * pending, except a step failure it ended with), the record read back, then `onCancel(input, ctx,
 * cancel)` driven like `run()` in a position space of its own. Its outcome never changes the run's:
 * it ends cancelled, with `cleanup: 'done'` or `'failed'` (and the error) in the `run.cancelled` event.
 * @internal
 */
export async function driveCleanup(
  run: ActiveRun,
  wf: Required<WorkflowInstance>,
  store: RunStateStore,
): Promise<CleanupEnd> {
  // A cleanup an earlier claim began (a resume, or the replay check): its record came with the claim,
  // and this claim ran nothing before it. Else the marker, then the record read back, whole.
  let record = run.loaded;
  try {
    if (!record.checkpoints.has(CLEANUP_BASE)) {
      const endedWith = stepFailuresIn(run.endedWith);
      const pending = run.log.takePending().filter((r) => !(r.failure && endedWith.has(r.index)));
      const cursor = cursorAt(run, CLEANUP_BASE, CLEANUP_MARKER, 'done');
      const marker = { index: CLEANUP_BASE, name: CLEANUP_MARKER };
      await run.fenced(() => store.markCleanup(run.fence, marker, cursor, pending), 'cleanup', pending);
      record = await store.loadForReplay(run.runId);
    }
  } catch (err) {
    if (err instanceof LeaseLostError) return { lost: err };
    // The marker's write failed on the connection: retried from the record (RunControl.storeFailed).
    if (run.control.stop) return { stop: run.control.stop };
    return { unrecorded: err as Error };
  }
  run.enterCleanup(record);
  const info = cancelInfo(record);
  const end = await drivePhase(run, () => wf.onCancel(run.claim.input, run.context, info));
  // Unlike run()'s, a step failure the cleanup ended with stays recorded: the cleanup never runs
  // again, and its record (replayed by the replay check) is then whole.
  let failure = 'error' in end ? end.error : null;
  const stop = run.control.stop;
  if (stop && stop.kind !== 'usage') return { stop };
  if (stop) failure = stop.error;
  const error = serializeError(new RunCancelledError(run.runId, info.reason));
  const payload =
    failure === null
      ? { by: 'worker', cleanup: 'done' }
      : { by: 'worker', cleanup: 'failed', cleanupError: String((failure as Error)?.message ?? failure) };
  return { write: { status: 'cancelled', error, event: 'run.cancelled', payload } };
}
