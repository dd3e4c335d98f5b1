import { SignalTimeoutError } from '../errors/signal-timeout.error';
import type { WaitForSignalOptions } from '../interfaces/command.interface';
import type { ActiveRun } from './active-run';
import { runStorage } from './run-storage';
import { DurableUsageError } from '../errors/durable-usage.error';

function notInStep(what: string): void {
  if (runStorage.getStore()?.step)
    throw new DurableUsageError(`${what} must be called in the workflow body, not inside a @DurableStep`);
}

/**
 * `ctx.sleep(ms)`: the first time, park the run until now() + ms (database clock) and record that due
 * time as checkpoint `$sleep`; when the run is claimed again at or after it, continue. Holds no worker
 * and no connection while it sleeps.
 */
export async function sleepStep(run: ActiveRun, ms: number): Promise<void> {
  if (!Number.isFinite(ms) || ms < 0)
    throw new RangeError(`ctx.sleep(ms): ms must be a finite number >= 0, got ${ms}`);
  notInStep('ctx.sleep()');
  run.checkActive();
  const index = run.allocIndex();
  const rec = run.recordedAt(index, '$sleep');
  if (rec) {
    await run.log.replayed(index);
    if (Date.parse(rec.output as string) <= run.dbNow()) return;
  }
  await run.goLive();
  await run.quiesce();
  const seq = rec ? null : run.log.takeSeq();
  try {
    const parked = await run.fenced(
      () =>
        run.writes.park(run.fence, {
          at: rec ? (rec.output as string) : null,
          delayMs: rec ? null : ms,
          attemptsDelta: run.progressed ? 0 : -1,
          reason: 'sleeping',
          event: 'run.sleeping',
          payload: { step: index, ms },
          dueRecord: seq === null ? undefined : { index, name: '$sleep', seq },
          records: run.takePending(),
        }),
      'park',
    );
    run.parkedUntil = parked.availableAt;
  } catch (err) {
    if (seq !== null) run.log.abandon(seq);
    throw err;
  }
  run.suspend('sleeping');
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
  run: ActiveRun,
  name: string,
  options: WaitForSignalOptions,
): Promise<unknown> {
  const timeoutMs = options.timeoutMs;
  if (timeoutMs !== undefined && (!Number.isFinite(timeoutMs) || timeoutMs < 0)) {
    throw new RangeError(`ctx.waitForSignal(name, { timeoutMs }): timeoutMs must be >= 0, got ${timeoutMs}`);
  }
  notInStep('ctx.waitForSignal()');
  run.checkActive();
  const deadlineIndex = run.allocIndex();
  const signalIndex = run.allocIndex();
  const deadline = run.recordedAt(deadlineIndex, `$deadline:${name}`);
  const outcome = run.recordedAt(signalIndex, `$signal:${name}`);
  if (outcome) {
    await run.log.replayed(signalIndex);
    const o = outcome.output as { payload?: unknown; timedOut?: boolean };
    if (o.timedOut) throw new SignalTimeoutError(name, timeoutMs ?? 0);
    return o.payload;
  }
  await run.goLive();
  await run.quiesce();
  const seq = run.log.takeSeq();
  const reason = `waiting for signal "${name}"`;
  let got;
  try {
    got = await run.fenced(
      () =>
        run.writes.waitForSignal(run.fence, {
          name,
          deadlineIndex,
          signalIndex,
          deadline: deadline ? recordedDeadline(deadline.output) : null,
          recordDeadline: !deadline,
          timeoutMs: timeoutMs ?? null,
          reason,
          attemptsDelta: run.progressed ? 0 : -1,
          seq,
          records: run.takePending(),
        }),
      'wait-for-signal',
    );
  } catch (err) {
    run.log.abandon(seq);
    throw err;
  }
  if (got.outcome === 'parked') {
    run.log.abandon(seq);
    run.parkedUntil = got.availableAt;
    return run.suspend(reason);
  }
  run.progressed = true;
  await run.log.deliverLive(seq);
  if (got.outcome === 'timed_out') throw new SignalTimeoutError(name, timeoutMs ?? 0);
  return got.payload;
}
