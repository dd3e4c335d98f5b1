import type { RunCursor } from '../../interfaces/run.interface';
import { encodeValue } from '../../util/codec';
import { isNonRetryable } from '../retry';
import { serializeError } from '../serialize-error';
import { errorFromStored } from '../stored-error';
import { cursorAt, StepEnv } from './step-env';

/*
 * A step's failed attempts, counted across claims. The retry policy retries a step inside one claim;
 * a worker that dies between two attempts would leave the next claim `maxAttempts` more. So each
 * failed attempt (an error the policy counts, not an engine stop) is recorded in the run's cursor
 * (`RunCursor.failures`: the count and the error in its stored form; one fenced statement, failure
 * path only) before it is retried or fails the step, and a claim that resumes the step continues
 * the count: one that finds `maxAttempts` failures fails the step with the recorded error, as the
 * policy did, without running it again. The step's commit (cursor `done`) drops the count; so does
 * a run that ends with the step's failure (`forgetFailures`): a retry of the run runs the step
 * afresh, as it does without a crash.
 */

type Failures = NonNullable<RunCursor['failures']>;

/** The stored error a step failure came from, when it was rebuilt from a record (hidden property). */
const RECORDED = Symbol('durable.recordedAttemptError');

/** The failed attempts of the step at `index` recorded so far (by this claim or an earlier one). */
export function recordedFailures(env: StepEnv, index: number, name: string): Failures | null {
  const c = env.cursor;
  const f = c.failures;
  if (c.step !== index || c.name !== name || c.status !== 'started') return null;
  if (!f || typeof f !== 'object' || typeof f.count !== 'number' || !f.error) return null;
  return f;
}

/** The error of a step whose recorded failures reached `maxAttempts`: the last one's, not run again. */
export function spentAttempts(f: Failures): Error {
  const err = errorFromStored(f.error);
  Object.defineProperty(err, RECORDED, { value: f.error, enumerable: false });
  return err;
}

/** The stored form of a step's error, as its failure is recorded (the recorded one, when it was). */
export function storedStepError(err: unknown): Record<string, unknown> {
  const recorded = err && typeof err === 'object' ? (err as { [RECORDED]?: unknown })[RECORDED] : undefined;
  if (recorded && typeof recorded === 'object') return recorded as Record<string, unknown>;
  // The error's own primitive fields too (`status`, `retryAfterMs`): the workflow may branch on them.
  return serializeError(err, { fields: true });
}

/**
 * Counts the failed attempt `err` of the step at `index` (`before` failures recorded so far): made
 * durable before the policy retries the step or fails it. Not an attempt: the engine stopping the
 * run (lease lost, cancel, drain, shutdown: the body was cut off), or an error the policy does not
 * retry (the step fails at once, counted or not). Returns the count.
 */
export async function countFailure(
  env: StepEnv,
  name: string,
  index: number,
  err: unknown,
  before: number,
): Promise<number> {
  if (env.control.signal.aborted || env.control.stop || isNonRetryable(err)) return before;
  const count = before + 1;
  const error = encodeValue(storedStepError(err), `error of step "${name}"`, Number.MAX_SAFE_INTEGER)
    .value as Record<string, unknown>;
  const c = env.cursor;
  const here = c.step === index && c.name === name && c.status === 'started';
  const position = here ? { item: c.item, partial: c.partial } : { item: null };
  const cursor: RunCursor = {
    ...cursorAt(env, index, name, 'started', position),
    failures: { count, error },
  };
  await env.fenced(() => env.store.progress(env.fence, cursor), 'failed attempt');
  env.cursor = cursor;
  return count;
}

/**
 * Before the finish of a run that ended with the failure of a step whose failed attempts the cursor
 * counts: the count is dropped (one fenced statement), so that a retry of the run (backoff, or an
 * operator's) runs the step afresh. Undefined when there is nothing to drop.
 */
export function forgetFailures(env: StepEnv, endedWith: ReadonlySet<number>): Promise<void> | undefined {
  const c = env.cursor;
  if (!c.failures || !endedWith.has(c.step)) return undefined;
  const cursor: RunCursor = { ...c };
  delete cursor.failures;
  return env
    .fenced(() => env.store.progress(env.fence, cursor), 'failed attempts cleared')
    .then(() => {
      env.cursor = cursor;
    });
}
