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
 * Gives `target` a `signal` (anySignal of `signals`) made when it is first read: most step bodies never
 * read theirs, and AbortSignal.any per attempt was a measurable share of a compute step's CPU.
 */
export function lazySignal(target: { signal?: AbortSignal }, ...signals: AbortSignal[]): void {
  let signal: AbortSignal | undefined;
  Object.defineProperty(target, 'signal', {
    get: () => (signal ??= anySignal(...signals)),
    configurable: true,
    enumerable: true,
  });
}

/**
 * `p`, or a rejection with the reason of the first of `signals` to fire: the engine stops waiting for a
 * body that ignores its signal (a stop, a timeout), the body itself goes on until it settles. Several
 * signals are listened to one by one (no combined signal is made for it).
 */
export function untilAborted<T>(p: Promise<T>, signals: AbortSignal | AbortSignal[]): Promise<T> {
  const all = Array.isArray(signals) ? signals : [signals];
  const fired = all.find((s) => s.aborted);
  if (fired) {
    p.catch(() => undefined); // nobody waits for it: its rejection must not crash the process
    return Promise.reject(fired.reason as Error);
  }
  return new Promise<T>((resolve, reject) => {
    const listeners = all.map((s) => {
      const onAbort = () => reject(s.reason as Error);
      s.addEventListener('abort', onAbort, { once: true });
      return () => s.removeEventListener('abort', onAbort);
    });
    const off = () => listeners.forEach((remove) => remove());
    p.then(
      (v) => (off(), resolve(v)),
      (e) => (off(), reject(e)),
    );
  });
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
