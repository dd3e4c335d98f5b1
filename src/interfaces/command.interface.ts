import type { RetryPolicy } from '../options/durable-execution-options.interface';
import type { FenceSignature } from '../util/fence-token';

/**
 * What to do when a crash hid a command's outcome (reserved, dispatched or not, nothing recorded):
 * - `lookup`: ask the target by key (the provider implements `CommandLookup`); call again only when
 *   the target never saw the key;
 * - `retry-with-key`: call again with the same key (for targets that deduplicate keys);
 * - `manual`: park the run for an operator (`RunRepository.resolveCommand`).
 */
export type InDoubtPolicy = 'lookup' | 'retry-with-key' | 'manual';

/** Options of `@IdempotentCommand`. */
export interface IdempotentCommandOptions<A = any> {
  /** Stable command name, part of the idempotency key. */
  name: string;
  /** Resolution of an in-doubt command. */
  inDoubt: InDoubtPolicy;
  /** Park the run before dispatch until `RunRepository.approve`/`reject`; or a predicate on the args. */
  requiresApproval?: boolean | ((args: A) => boolean);
  /** In-claim retries of a call that threw (same key every time). Default: 1 attempt, no retry. */
  retry?: RetryPolicy;
  /**
   * Give up on a call that has not answered within this: its `signal` fires with `StepTimeoutError`,
   * nothing it still sends leaves, and its outcome is unknown, so the command is in doubt and settled by
   * `inDoubt` (or sent again with the same key, per `retry`). Default: the module's `defaultTimeoutMs`
   * (10 minutes); 0: none.
   */
  timeoutMs?: number;
  /** Tool-call identity from the model output, part of the key. Default: `args.toolCallId ?? args.tool_call_id`. */
  toolCallId?: (args: A) => string | undefined;
  /**
   * The command's identity in the run, in place of its position: its key becomes
   * `run_<id>:key_<value>:<name>` (undefined: by position, the default). Give one when the call's
   * position can depend on timing (a command after a step inside a `Promise.all` branch, after a
   * `Promise.race`) and the database replicates asynchronously: a run that runs again after a failover
   * lost its last commits may number such calls anew, and only a key of their own lets the target or a
   * lookup recognise what was already sent. Unique per run (a second call with a used value is a usage
   * error); 1-200 letters, digits, `_`, `-` or `.`.
   * @example
   * ```ts
   * key: (a: RefundArgs) => `refund-${a.orderId}`
   * ```
   */
  key?: (args: A) => string | undefined;
  /**
   * Whether an error the call threw says the target refused it (did nothing): then the command is
   * recorded `failed` and the workflow gets `CommandFailedError`. A `NonRetryableError` or an error
   * with `retryable: false` always is. Any other error (a 504, a timeout, a reset) leaves the outcome
   * unknown: the command is in doubt and settled by `inDoubt` before the workflow sees anything.
   * @example `definiteError: (e) => e instanceof HttpError && e.status >= 400 && e.status < 500`
   */
  definiteError?: (error: unknown) => boolean;
}

/** Second argument of a command method inside a run. */
export interface CommandContext {
  /** Deterministic key: `run_<id>:step_<n>[:tool_call_<id>]:<name>` (or `run_<id>:key_<key>:<name>`). Send it to the target. */
  idempotencyKey: string;
  /** Fires when the lease is lost or the run is cancelled. */
  signal: AbortSignal;
  /**
   * The fencing token of this claim. A target that supports conditional writes can refuse a call whose
   * epoch is lower than one it has already seen for the run: that closes the last window in which a
   * frozen worker could still reach it after a takeover (see docs/ARCHITECTURE.md).
   */
  fence: CommandFence;
}

/**
 * Which claim sends a command: the run, its fencing token (`timeline`, `epoch`), the lease's end, the
 * command, and (module option `fence`) the signature a target checks. Compare tokens as (timeline, epoch)
 * pairs: a later claim has a greater pair. A target that keeps the greatest pair it saw per run refuses a
 * smaller one (a stale claim); an equal one is the same claim sending again (a retry). The epoch alone
 * rises by one per claim, but after a failover that lost the old primary's last commits it can repeat;
 * the timeline then is higher.
 */
export interface CommandFence {
  runId: string;
  epoch: number;
  /** The PostgreSQL WAL timeline the claim was made on (1 until a promotion or a point-in-time recovery). */
  timeline: number;
  /**
   * The latest time this claim's lease holds, by the worker's clock, as of when it is read: heartbeats
   * move it on while the claim holds (a signed token expires then).
   */
  leaseExpiresAt: Date;
  /**
   * The idempotency key of the command this token is for (the one sent or looked up). Always set by the
   * engine; optional for contexts built by hand (a command called outside a run).
   */
  commandKey?: string;
  /**
   * The MAC over run, timeline, epoch, command key and expiry (`leaseExpiresAt` when read) under the
   * module's `fence` key, sent by `fenceHeaders` as a `v2` header; absent without that option (`v1`).
   * Call `fenceHeaders(ctx.fence)` at each request, not once ahead: each gets the lease's end as of then.
   */
  signature?: FenceSignature;
}

/** What a target answers when asked about a key. */
export type LookupResult = { found: true; result: unknown } | { found: false };

/** Third argument of `CommandLookup.lookupCommand`: which claim asks. */
export interface LookupContext {
  /**
   * The fencing token of the claim that looks the command up. A target that checks tokens
   * (`FenceVerifier`) must check it on its lookup endpoint too: send it with `fenceHeaders(context.fence)`.
   */
  fence: CommandFence;
}

/** Implemented by a provider whose commands use `inDoubt: 'lookup'`. */
export interface CommandLookup {
  /**
   * Did the target apply the command with this key? If so, with which result? The engine passes
   * `context` (the asking claim's fencing token); it is optional so that implementations written
   * before it, and direct calls, still compile.
   */
  lookupCommand(command: string, idempotencyKey: string, context?: LookupContext): Promise<LookupResult>;
}

/** How an operator settles a command (`RunRepository.resolveCommand`). */
export type CommandResolution =
  { outcome: 'succeeded'; result: unknown } | { outcome: 'failed'; error: string } | { outcome: 'retry' };

/** An operator's decision on a command awaiting approval. */
export interface ApprovalDecision {
  by: string;
  note?: string;
}

/** A side-effect command as stored in `ai_commands`. */
export interface CommandView {
  idempotencyKey: string;
  runId: string;
  stepIndex: number;
  name: string;
  payload: unknown;
  status: 'pending' | 'succeeded' | 'failed' | 'in_doubt' | 'awaiting_approval' | 'approved' | 'rejected';
  result: unknown;
  error: unknown;
  epoch: number;
  createdAt: Date;
  updatedAt: Date;
}

/** Options of `ctx.waitForSignal`. */
export interface WaitForSignalOptions {
  /** Give up after this long (database clock, from the first time the wait is reached). */
  timeoutMs?: number;
}

/** Metadata recorded by `@IdempotentCommand`. @internal */
export interface CommandMetadata extends IdempotentCommandOptions {
  declaredAt: string;
}
