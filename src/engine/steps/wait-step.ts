import { DurableUsageError } from '../../errors/durable-usage.error';
import { SignalTimeoutError } from '../../errors/signal-timeout.error';
import type { WaitForSignalOptions } from '../../interfaces/command.interface';
import { decodeStored } from '../../util/codec';
import { runStorage } from '../run-storage';
import { goLive, StepEnv } from './step-env';

/** A wait inside a step or command body, or with a bad argument: the run fails (usage), once. */
export function misuse(env: StepEnv, message: string): never {
  throw env.control.halt({ kind: 'usage', error: new DurableUsageError(message) });
}

export function notInStep(env: StepEnv, what: string): void {
  const step = runStorage.getStore()?.step;
  if (step)
    misuse(
      env,
      `${what} must be called in the workflow body, not inside ${step.command ? `the body of ${step.name}` : 'a @DurableStep'}`,
    );
  env.control.refuseParkInCleanup(what);
}

/**
 * `ctx.sleep(ms)`: the first time, park the run until now() + ms (database clock) and record that due
 * time as checkpoint `$sleep`; when the run is claimed again at or after it, continue. Holds no worker
 * and no connection while it sleeps.
 */
export async function sleepStep(env: StepEnv, ms: number): Promise<void> {
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0)
    misuse(env, `ctx.sleep(ms): ms must be a finite number >= 0, got ${String(ms)}`);
  notInStep(env, 'ctx.sleep()');
  env.control.checkActive();
  const index = env.log.allocIndex();
  const rec = env.log.recordedAt(index, '$sleep');
  if (rec) {
    await env.log.replayed(index);
    if (Date.parse(rec.output as string) <= env.dbNow()) return;
  }
  await goLive(env, index, '$sleep');
  await env.control.quiesce();
  const seq = rec ? null : env.log.takeSeq();
  const records = env.log.takePending();
  let until: Date | null;
  try {
    const parked = await env.fenced(
      () =>
        env.store.park(env.fence, {
          at: rec ? (rec.output as string) : null,
          delayMs: rec ? null : ms,
          attemptsDelta: env.control.attemptsDelta('give-back'),
          reason: 'sleeping',
          event: 'run.sleeping',
          payload: { step: index, ms },
          dueRecord: seq === null ? undefined : { index, name: '$sleep', seq },
          records,
        }),
      'park',
      records,
    );
    until = parked.availableAt;
  } catch (err) {
    if (seq !== null) env.log.abandon(seq);
    throw err;
  }
  throw env.control.halt({ kind: 'parked', reason: 'sleeping', until, forOperator: false });
}

/** A recorded deadline as the database reads it: null when the wait has none. */
function recordedDeadline(output: unknown): string | null {
  return typeof output === 'string' && output !== 'infinity' ? output : null;
}

/**
 * `ctx.waitForSignal(name, { timeoutMs })`: two indexes, `$deadline:<name>` (when the wait gives up,
 * database clock, recorded the first time) and `$signal:<name>` (the payload, or the timeout). One
 * fenced statement consumes a signal already stored, records the timeout, or parks the run until a
 * signal wakes it or the deadline passes; a signal sent while that statement runs is never lost.
 */
export async function waitForSignalStep(
  env: StepEnv,
  name: string,
  options: WaitForSignalOptions,
  engineName = false,
  /** A wait for a child's end: at its deadline the child's cancel is requested before the timeout. */
  child?: { runId: string; cancelReason: string },
): Promise<unknown> {
  if (!engineName && typeof name === 'string' && name.startsWith('$'))
    misuse(
      env,
      `ctx.waitForSignal(name): "${name}" starts with '$', which is kept for the engine's own signals`,
    );
  const timeoutMs = options.timeoutMs;
  if (timeoutMs !== undefined && (!Number.isFinite(timeoutMs) || timeoutMs < 0)) {
    misuse(
      env,
      `ctx.waitForSignal(name, { timeoutMs }): timeoutMs must be a finite number >= 0, got ${timeoutMs}`,
    );
  }
  notInStep(env, 'ctx.waitForSignal()');
  env.control.checkActive();
  const deadlineIndex = env.log.allocIndex();
  const signalIndex = env.log.allocIndex();
  const deadline = env.log.recordedAt(deadlineIndex, `$deadline:${name}`);
  const outcome = env.log.recordedAt(signalIndex, `$signal:${name}`);
  if (outcome) {
    await env.log.replayed(signalIndex);
    const o = outcome.output as { payload?: unknown; timedOut?: boolean };
    if (o.timedOut) throw new SignalTimeoutError(name, timeoutMs ?? 0);
    return o.payload;
  }
  await goLive(env, signalIndex, `$signal:${name}`);
  await env.control.quiesce();
  const seq = env.log.takeSeq();
  const records = env.log.takePending();
  const reason = `waiting for signal "${name}"`;
  let got;
  let due = deadline ? recordedDeadline(deadline.output) : null;
  let carried = records;
  try {
    for (let first = true; ; first = false) {
      const write = carried;
      got = await env.fenced(
        () =>
          env.store.waitForSignal(env.fence, {
            name,
            deadlineIndex,
            signalIndex,
            deadline: due,
            recordDeadline: !deadline && first,
            timeoutMs: timeoutMs ?? null,
            reason,
            attemptsDelta: env.control.attemptsDelta('give-back'),
            seq,
            records: write,
            childId: child?.runId,
          }),
        'wait-for-signal',
        write,
      );
      if (got.outcome !== 'cancel_first' || !child) break;
      // The child's deadline passed: its cancel is requested first (it can no longer end succeeded),
      // then the wait is asked again and records the timeout, or the child's end if it came first.
      due = got.due;
      carried = [];
      await env.fenced(
        () => env.store.cancelChild(env.fence, child.runId, child.cancelReason),
        'cancel of a child run',
      );
    }
  } catch (err) {
    env.log.abandon(seq);
    throw err;
  }
  if (got.outcome === 'parked') {
    env.log.abandon(seq);
    throw env.control.halt({ kind: 'parked', reason, until: got.availableAt, forOperator: false });
  }
  env.control.endPark(); // the signal (or the timeout) was there: calls waiting on the park go on
  env.control.progressed = true;
  await env.log.deliverLive(seq);
  if (got.outcome === 'timed_out') throw new SignalTimeoutError(name, timeoutMs ?? 0);
  return decodeStored(got.payload); // as the replay of this wait will read it
}
