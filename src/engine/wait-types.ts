import type { PendingWaitRow } from '../store/run-state/settle-waits';

/** How a pending wait ended: a signal's payload, its timeout, or (a sleep) its timer fired. @internal */
export interface WaitOutcome {
  outcome: 'consumed' | 'timed_out' | 'fired';
  payload: unknown;
}

/** A wait to register: where its outcome is recorded, what it takes, when it gives up. @internal */
export interface WaitSpec extends PendingWaitRow {
  /** A child run's wait: at its deadline the child's cancel is requested before the timeout. */
  child?: { runId: string; cancelReason: string };
}
