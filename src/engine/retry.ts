import { CallAbandonedError } from '../errors/call-abandoned.error';
import { CommandInStepError } from '../errors/command-in-step.error';
import { DuplicateRegistrationError } from '../errors/duplicate-registration.error';
import { DurableUsageError } from '../errors/durable-usage.error';
import { ForeignThreadError } from '../errors/foreign-thread.error';
import { InvalidArgumentError } from '../errors/invalid-argument.error';
import { InvalidOptionsError } from '../errors/invalid-options.error';
import { MissingConcurrencyKeyError } from '../errors/missing-concurrency-key.error';
import { MissingDependencyError } from '../errors/missing-dependency.error';
import { DurableExecutionError } from '../errors/durable-execution.error';
import { LeaseLostError } from '../errors/lease-lost.error';
import { NonDeterminismError } from '../errors/non-determinism.error';
import { NonRetryableError } from '../errors/non-retryable.error';
import { PayloadTooLargeError } from '../errors/payload-too-large.error';
import { RunCancelledError } from '../errors/run-cancelled.error';
import { SerializationError } from '../errors/serialization.error';
import { StepTimeoutError } from '../errors/step-timeout.error';
import type { RetryPolicy } from '../options/durable-execution-options.interface';
import { LongTimer, longTimeout } from '../util/timers';

/**
 * A programming or configuration error: the same code fails the same way on every attempt (a misuse
 * of the library, invalid options or arguments, a missing optional dependency, a duplicate name, a
 * LangGraph thread of another run). Not
 * the engine errors that can be transient (`NoWorkerForKindError`, `SchemaNotReadyError`,
 * `RunNotFoundError`, `UnknownRunKindError` in a mixed fleet): those are retried.
 */
export function isProgrammingError(err: unknown): boolean {
  return (
    err instanceof DurableUsageError ||
    err instanceof CommandInStepError ||
    err instanceof InvalidOptionsError ||
    err instanceof InvalidArgumentError ||
    err instanceof MissingDependencyError ||
    err instanceof DuplicateRegistrationError ||
    err instanceof MissingConcurrencyKeyError ||
    err instanceof ForeignThreadError
  );
}

/**
 * Errors that must not be retried: the user said so, the input can never pass validation, a
 * programming error, or the engine itself stopped the run. class-validator's ValidationError and
 * errors flagged `retryable: false` count as validation errors.
 */
export function isNonRetryable(err: unknown): boolean {
  if (err instanceof NonRetryableError || err instanceof SerializationError) return true;
  if (err instanceof PayloadTooLargeError || err instanceof NonDeterminismError) return true;
  if (err instanceof LeaseLostError || err instanceof RunCancelledError) return true;
  if (err instanceof CallAbandonedError) return true; // run() had returned: nothing awaits a retry
  if (isProgrammingError(err)) return true;
  if (err instanceof DurableExecutionError) return false;
  const e = err as { name?: string; retryable?: unknown; constraints?: unknown } | null;
  return !!e && (e.retryable === false || e.name === 'ValidationError' || Array.isArray(err));
}

/** Delay before retry number `n` (1-based): exponential, capped, with symmetric jitter. */
export function backoffDelay(policy: Required<RetryPolicy>, n: number): number {
  const raw = Math.min(policy.maxDelayMs, policy.initialDelayMs * policy.multiplier ** (n - 1));
  const spread = raw * policy.jitter;
  return Math.max(0, Math.round(raw - spread + Math.random() * 2 * spread));
}

/** Resolves after `ms`, or rejects with the signal's reason when it aborts first. */
export function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const t = longTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      t.cancel();
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * Runs `fn` under the policy, retrying transient errors; stops at once when `signal` aborts. `first`:
 * the number of this first attempt (attempts an earlier claim made count against `maxAttempts`).
 */
export async function withRetry<T>(
  policy: Required<RetryPolicy>,
  signal: AbortSignal,
  fn: () => Promise<T>,
  first = 1,
): Promise<T> {
  for (let attempt = first; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (signal.aborted) throw signal.reason ?? err;
      if (attempt >= policy.maxAttempts || isNonRetryable(err)) throw err;
      await abortableSleep(backoffDelay(policy, attempt), signal);
    }
  }
}

/**
 * An attempt's timeout: the call's own `timeoutMs`, else the module's `defaultTimeoutMs`; 0 is none.
 */
export function attemptTimeout(own: number | undefined, moduleDefault: number): number {
  return own ?? moduleDefault;
}

/** Rejects with StepTimeoutError when `p` does not settle within `ms` (no limit when ms is 0 or undefined). */
export function withTimeout<T>(p: Promise<T>, ms: number | undefined, stepName: string): Promise<T> {
  if (!ms) return p;
  let t: LongTimer;
  const timeout = new Promise<never>((_, reject) => {
    t = longTimeout(() => reject(new StepTimeoutError(stepName, ms)), ms);
  });
  return Promise.race([p, timeout]).finally(() => t.cancel());
}

/** An AbortSignal that fires when any of `signals` does (AbortSignal.any where Node has it). */
export function anySignal(...signals: AbortSignal[]): AbortSignal {
  const any = (AbortSignal as { any?: (s: AbortSignal[]) => AbortSignal }).any;
  if (any) return any(signals);
  const both = new AbortController();
  for (const s of signals) {
    if (s.aborted) {
      both.abort(s.reason);
      break;
    }
    s.addEventListener('abort', () => both.abort(s.reason), { once: true });
  }
  return both.signal;
}

/**
 * A step attempt's `ctx.signal` (anySignal of `signals`), made when it is first asked for: most step
 * bodies never read theirs, and AbortSignal.any per attempt was a measurable share of a compute step's
 * CPU. A function in `signals` is called then, to make that signal.
 */
export function lazySignal(...signals: Array<AbortSignal | (() => AbortSignal)>): () => AbortSignal {
  let signal: AbortSignal | undefined;
  return () => (signal ??= anySignal(...signals.map((s) => (typeof s === 'function' ? s() : s))));
}

/**
 * How long the engine waits for a step attempt's body: `p`, or a rejection with StepTimeoutError after
 * `ms` (0 or undefined: never), with `signal`'s reason when it fires (the run's stop), or with the error
 * `stop` is given (the engine gave up on the body). The first of them wins; `signal` fired already wins
 * over `stopped` given already. One promise, one timer and one listener per attempt (cheaper than races).
 */
export function attemptOutcome<T>(
  p: Promise<T>,
  ms: number | undefined,
  stepName: string,
  signal: AbortSignal,
  stopped?: Error,
): { promise: Promise<T>; stop(err: Error): void } {
  let fail!: (err: Error) => void;
  const promise = new Promise<T>((resolve, reject) => {
    let timer: LongTimer | undefined;
    const onAbort = (): void => fail(signal.reason as Error);
    const end = (): void => {
      timer?.cancel();
      signal.removeEventListener('abort', onAbort);
    };
    let open = true;
    fail = (err) => {
      if (!open) return;
      open = false;
      end();
      reject(err);
    };
    p.then(
      (v) => {
        if (!open) return;
        open = false;
        end();
        resolve(v);
      },
      (e) => fail(e as Error),
    );
    if (signal.aborted) return fail(signal.reason as Error);
    if (stopped) return fail(stopped);
    signal.addEventListener('abort', onAbort, { once: true });
    if (ms) timer = longTimeout(() => fail(new StepTimeoutError(stepName, ms)), ms);
  });
  return { promise, stop: (err) => fail(err) };
}

/**
 * A step attempt's own stop: the engine gave up on its body (its timeout, or a bounded settle after the
 * run stopped). The first error given is the reason; the body's part of `ctx.signal` (`signal`) is an
 * AbortController made only when the body reads its signal, and the engine's wait for the body
 * (`wait`) rejects with the reason.
 */
export class AttemptStop {
  private reason: Error | undefined;
  private controller: AbortController | undefined;
  private outcome: { stop(err: Error): void } | undefined;

  /** The attempt's signal (fired once stopped), for `lazySignal`. */
  readonly signal = (): AbortSignal => {
    this.controller ??= new AbortController();
    if (this.reason) this.controller.abort(this.reason);
    return this.controller.signal;
  };

  stop(err: Error): void {
    this.reason ??= err;
    this.controller?.abort(this.reason);
    this.outcome?.stop(this.reason);
  }

  /** The body's outcome, as `attemptOutcome` waits for it, this stop included. */
  wait<T>(body: Promise<T>, ms: number | undefined, stepName: string, runSignal: AbortSignal): Promise<T> {
    const outcome = attemptOutcome(body, ms, stepName, runSignal, this.reason);
    this.outcome = outcome;
    return outcome.promise;
  }
}

/**
 * The grace a timed-out step body gets to settle once its signal fired: the next attempt starts once
 * it has settled (two bodies of a step never run at once), or after this grace, when it is abandoned.
 */
export const ABANDON_GRACE_MS = 5000;

/**
 * Waits for a timed-out body to settle, at most its grace; then gives up on it. `closed`: the error to
 * throw instead of going on to a next attempt (the run stopped or gave up on the call meanwhile), or null.
 */
export async function settleOrAbandon(
  body: { promise: Promise<unknown>; abandon(): void },
  closed?: () => Error | null,
): Promise<void> {
  let t: LongTimer | undefined;
  const grace = new Promise<void>((r) => (t = longTimeout(r, ABANDON_GRACE_MS)));
  await Promise.race([body.promise.then(noop, noop), grace]);
  t?.cancel();
  body.abandon(); // nothing when it settled
  const refused = closed?.();
  if (refused) throw refused;
}

const noop = (): void => undefined;
