import { LeaseLostError } from '../errors/lease-lost.error';
import type { NonDeterminismError } from '../errors/non-determinism.error';
import { RunCancelledError } from '../errors/run-cancelled.error';

/**
 * Why a run stopped before its workflow returned, as the executor settles it:
 * - `drain`: a draining worker reached a step boundary; the executor releases the run (fenced).
 * - `released`: the draining worker already released the run; nothing more is written.
 * - `parked`: the run parked itself (approval, in-doubt command, sleep, signal wait), already recorded;
 *   `until` is when it is due (null: until woken), `forOperator` when a person must act.
 * - `suspended`: the run must be claimed again (a command was settled meanwhile); the executor releases it.
 * - `retry`: the run is retried later with backoff (a command in doubt its policy settles in a later
 *   claim), whatever the workflow did with the throw; `cause` is recorded as the run's error.
 * - `cancelled`, `lease-lost`, `non-determinism`: the typed error the workflow saw.
 * - `usage`: the library was used where it cannot work (a command inside a step, a call still live
 *   when run() returned, …): the run fails with that error, even when user code caught it.
 * @internal
 */
export type RunStop =
  | { kind: 'drain' }
  | { kind: 'retry'; reason: string; cause: unknown }
  | { kind: 'usage'; error: Error }
  | { kind: 'released' }
  | { kind: 'parked'; reason: string; until: Date | null; forOperator: boolean }
  | { kind: 'suspended'; reason: string }
  | { kind: 'cancelled'; error: RunCancelledError }
  | { kind: 'lease-lost'; error: LeaseLostError }
  | { kind: 'non-determinism'; error: NonDeterminismError };

/** Why the worker's heartbeat stops a run: its lease is gone, or a cancel was requested. */
export type HeartbeatStop = Extract<RunStop, { kind: 'lease-lost' | 'cancelled' }>;

/** What a heartbeat's answer for one claim means: lost (no row came back), cancelled, or nothing. */
export function heartbeatStop(
  claim: { id: string; epoch: number; cancelReason: string | null },
  state: { cancelRequested: boolean } | undefined,
): HeartbeatStop | null {
  if (!state) return { kind: 'lease-lost', error: new LeaseLostError(claim.id, claim.epoch, 'heartbeat') };
  if (state.cancelRequested)
    return { kind: 'cancelled', error: new RunCancelledError(claim.id, claim.cancelReason) };
  return null;
}

/** The stops that carry a typed error of their own. */
type ErrorStop = Extract<RunStop, { error: Error }>;

/**
 * Thrown inside a workflow once the run stopped without an error of its own (parked, draining,
 * released, suspended): the executor only unwinds. Not an error the workflow should catch; if it
 * does, every later step throws it again.
 * @internal
 */
export class RunSuspended extends Error {
  constructor(readonly stop: Exclude<RunStop, ErrorStop> | { kind: 'ended' }) {
    super(`run stopped: ${'reason' in stop ? stop.reason : stop.kind}`);
    this.name = 'RunSuspended';
  }
}

/** What the workflow's code sees once the run stopped for `stop`. */
export function stopError(stop: RunStop): Error {
  return 'error' in stop ? stop.error : new RunSuspended(stop);
}
