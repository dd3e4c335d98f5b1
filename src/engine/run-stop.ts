import type { LeaseLostError } from '../errors/lease-lost.error';
import type { NonDeterminismError } from '../errors/non-determinism.error';
import type { RunCancelledError } from '../errors/run-cancelled.error';

/**
 * Why a run stopped before its workflow returned, as the executor settles it:
 * - `drain`: a draining worker reached a step boundary; the executor releases the run (fenced).
 * - `released`: the draining worker already released the run; nothing more is written.
 * - `parked`: the run parked itself (approval, in-doubt command, sleep, signal wait), already recorded;
 *   `until` is when it is due (null: until woken), `forOperator` when a person must act.
 * - `suspended`: the run must be claimed again (a command was settled meanwhile); the executor releases it.
 * - `cancelled`, `lease-lost`, `non-determinism`: the typed error the workflow saw.
 * @internal
 */
export type RunStop =
  | { kind: 'drain' }
  | { kind: 'released' }
  | { kind: 'parked'; reason: string; until: Date | null; forOperator: boolean }
  | { kind: 'suspended'; reason: string }
  | { kind: 'cancelled'; error: RunCancelledError }
  | { kind: 'lease-lost'; error: LeaseLostError }
  | { kind: 'non-determinism'; error: NonDeterminismError };

/** Why the worker's heartbeat stops a run: its lease is gone, or a cancel was requested. */
export type HeartbeatStop = Extract<RunStop, { kind: 'lease-lost' | 'cancelled' }>;

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
