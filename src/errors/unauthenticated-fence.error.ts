import { DurableExecutionError } from './durable-execution.error';

/**
 * Why a target refused a fencing token as not authentic for its request:
 * - `unsigned`: a v1 token (no MAC) where the target requires signed ones;
 * - `unknown-key`: signed under a key id the target does not list;
 * - `forged`: its MAC does not match (another secret, or fields changed after signing);
 * - `expired`: past its expiry (its claim's lease end) by more than the allowed clock skew;
 * - `lifetime`: it expires further ahead than any worker's token can (`maxTokenLifetimeMs`);
 * - `other-command`: signed for another command than the one the request serves.
 */
export type FenceRefusal = 'unsigned' | 'unknown-key' | 'forged' | 'expired' | 'lifetime' | 'other-command';

const WHAT_TO_DO: Record<FenceRefusal, string> = {
  unsigned:
    'Give every worker that calls this target the module option fence: { keyId, secret } with a key this ' +
    "target's FenceVerifier lists (its keys option); a request without one did not come from such a worker.",
  'unknown-key':
    "During a rotation list both the old and the new key id in the target's FenceVerifier keys until every " +
    "worker signs with the new one; otherwise the worker's fence.keyId is wrong or the request is forged.",
  forged:
    "Check that the worker's fence.secret and the target's key of that id are the same bytes; otherwise the " +
    'request was forged or altered on the way.',
  expired:
    'A token holds until its claim’s lease ends: send it when the command runs, not later. If the clocks of ' +
    "the worker and the target differ by more than the verifier's clockSkewMs, synchronise them (NTP) or " +
    'raise clockSkewMs.',
  lifetime:
    "Set the verifier's maxTokenLifetimeMs to at least the workers' worker.leaseTtlMs (a token lives until " +
    'its lease ends), or synchronise the clocks.',
  'other-command':
    'Send a command’s own ctx.fence with its own ctx.idempotencyKey, and pass the key the request serves to ' +
    'FenceVerifier.check as commandKey.',
};

/**
 * A target refused a fencing token before looking at its table (`FenceVerifier.check`,
 * `DurableFenceGuard`): it is not signed by a key the target lists, was altered, expired, or belongs to
 * another command (`reason`). Nothing was written and the run's fence was not raised, so the run's
 * real worker is not blocked by it. `DurableExceptionFilter` answers 401.
 */
export class UnauthenticatedFenceError extends DurableExecutionError {
  declare readonly code: 'DURABLE_UNAUTHENTICATED_FENCE';
  constructor(
    /** Why the token was refused. */
    public readonly reason: FenceRefusal,
    /** The run the refused token names (not proven: the token was not authentic). */
    public readonly runId: string,
    /** What was wrong, in one clause. */
    detail: string,
  ) {
    super(
      'DURABLE_UNAUTHENTICATED_FENCE',
      `Refused a fencing token naming run ${runId}: ${detail}. ${WHAT_TO_DO[reason]} Nothing was written ` +
        `and the fence was not changed.`,
    );
  }
}
