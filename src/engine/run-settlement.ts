import { ChildRunError } from '../errors/child-run.error';
import { CommandFailedError } from '../errors/command-failed.error';
import { NonDeterminismError } from '../errors/non-determinism.error';
import { SignalTimeoutError } from '../errors/signal-timeout.error';
import { RunCancelledError } from '../errors/run-cancelled.error';
import type { RunAttemptOutcome } from '../interfaces/durable-observer.interface';
import type { ResolvedDurableOptions } from '../options/durable-execution-options.interface';
import type { FinishWrite } from '../store/run-state/finish-run';
import type { ActiveRun } from './active-run';
import { isNonRetryable, isProgrammingError } from './retry';
import { serializeError } from './serialize-error';
import { toStoredJson } from '../util/codec';
import type { CheckpointWrite } from '../store/run-state/fence';
import { crashPoint } from './crash-points';
import { stepFailuresIn } from './stored-error';
import { forgetFailures } from './steps/step-attempts';

/** The run fails for good with `err`; `reason` goes into the `run.failed` event. @internal */
export function failedWrite(err: unknown, reason: 'non_retryable' | 'usage' | 'recorded'): FinishWrite {
  const error = serializeError(err);
  return {
    status: 'failed',
    error,
    event: 'run.failed',
    payload: { reason, error: String(error.message ?? '') },
    ...(reason === 'usage' && {
      hint: ' (a programming error: not retried; fix the code and deploy it, then RunRepository.retry(id) runs it again)',
    }),
  };
}

/**
 * A run whose replay diverged from its record is held, not failed: parked with no due time and its
 * error kept, until a deploy that replays it runs and an operator retries it (RunRepository.retry).
 * @internal
 */
export function heldWrite(err: NonDeterminismError): FinishWrite {
  const error = serializeError(err);
  return {
    status: 'waiting',
    error,
    delayMs: 'never',
    event: 'run.held',
    payload: { reason: 'non_determinism', error: err.message },
    parkedReason: `held for a fixed deploy (non-determinism): ${err.message}`,
  };
}

/**
 * How a run whose workflow threw `err` leaves `running`: cancelled, failed for good, dead-lettered
 * when its attempts are spent, or back to `waiting` with exponential backoff and ±20% jitter.
 * `transient`: retried whatever the error is (the engine decided so, e.g. a command in doubt).
 * @internal
 */
export function errorWrite(
  run: ActiveRun,
  err: unknown,
  backoff: Pick<ResolvedDurableOptions['reconciler'], 'backoffBaseMs' | 'backoffMaxMs'>,
  how?: 'transient',
): FinishWrite {
  const error = serializeError(err);
  if (err instanceof RunCancelledError)
    return { status: 'cancelled', error, event: 'run.cancelled', payload: { by: 'worker' } };
  if (err instanceof NonDeterminismError) return heldWrite(err);
  // A programming error fails at its first claim: a retry would run the same code into it again.
  if (how !== 'transient' && isProgrammingError(err)) return failedWrite(err, 'usage');
  if (how !== 'transient' && isNonRetryable(err)) return failedWrite(err, 'non_retryable');
  // An outcome read from the run's record: every retry replays it and throws the same again.
  if (how !== 'transient' && isRecordedOutcome(err)) return failedWrite(err, 'recorded');
  // Transient: the claim already counted one attempt unless a step committed (which reset attempts).
  const attempts = run.control.progressed ? 1 : run.claim.attempts;
  const attemptsDelta = run.control.attemptsDelta('count');
  if (attempts >= run.claim.maxAttempts) {
    return {
      status: 'dead_lettered',
      error,
      attemptsDelta,
      event: 'run.dead_lettered',
      payload: { reason: 'attempts_exhausted', attempts, error: error.message },
      parkedReason: `attempts exhausted (${attempts}/${run.claim.maxAttempts}): ${String(error.message)}`,
    };
  }
  const delayMs = Math.round(
    Math.min(backoff.backoffMaxMs, backoff.backoffBaseMs * 2 ** (attempts - 1)) * (0.8 + Math.random() * 0.4),
  );
  return {
    status: 'waiting',
    error,
    delayMs,
    attemptsDelta,
    event: 'run.retry_scheduled',
    payload: { attempts, delayMs, error: error.message },
  };
}

/** The attempt's outcome (for observers) of each status a finish writes. @internal */
export const OUTCOMES: Record<FinishWrite['status'], RunAttemptOutcome> = {
  succeeded: 'succeeded',
  failed: 'failed',
  cancelled: 'cancelled',
  dead_lettered: 'dead_lettered',
  waiting: 'retry_scheduled',
};

/** How a log line names a run: id and kind, nothing of its data. @internal */
export const runLabel = (run: ActiveRun): string => `run ${run.runId} (kind '${run.kind}')`;

/**
 * How a run whose workflow returned `output` leaves `running` (a cancel request the finish finds
 * still wins, see FINISH_RUN_SQL). Throws when the output cannot be stored.
 * @internal
 */
export function successWrite(
  run: ActiveRun,
  output: unknown,
  maxOutputBytes: number,
  cleansUp: boolean,
): FinishWrite {
  const outputJson = toStoredJson(
    output === undefined ? null : output,
    `output of run kind "${run.kind}"`,
    maxOutputBytes,
  );
  return { status: 'succeeded', outputJson, event: 'run.succeeded', payload: {}, cleansUp };
}

/**
 * A signal wait's timeout, a command's recorded failure or rejection, a child run's recorded end: the
 * engine threw it from what the run's record holds (or records in the same statement), so a retry of
 * the run replays the same outcome and throws it again. Uncaught, the run fails once.
 * @internal
 */
export function isRecordedOutcome(err: unknown): boolean {
  return (
    err instanceof SignalTimeoutError || err instanceof CommandFailedError || err instanceof ChildRunError
  );
}

/**
 * What a finish carries beside its own transition: the values still pending, except a step failure
 * the run ended with (the workflow did not get past it: a retry of the run runs that step again), and
 * the last step's commit when it was held for the finish (HeldStep: one statement for both). The
 * failed attempts the cursor counts of a step the run ended with are dropped first (forgetFailures).
 * @internal
 */
export async function finishCarries(
  run: ActiveRun,
): Promise<{ pending: CheckpointWrite[]; step?: FinishWrite['step'] }> {
  const held = await run.held.take();
  const endedWith = stepFailuresIn(run.endedWith);
  const forgetting = forgetFailures(run, endedWith);
  if (forgetting) await forgetting;
  const pending = run.log.takePending().filter((r) => !(r.failure && endedWith.has(r.index)));
  if (!held) return { pending };
  crashPoint('before-step-commit', held.index);
  return { pending: [...pending, held.checkpoint], step: { cursor: held.cursor, payload: held.payload } };
}
