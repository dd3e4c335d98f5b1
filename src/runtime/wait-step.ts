import { SignalTimeoutError } from '../errors/signal-timeout.error';
import type { WaitForSignalOptions } from '../interfaces/command.interface';
import type { ActiveRun } from './active-run';
import { runStorage } from './run-storage';

function notInStep(what: string): void {
  if (runStorage.getStore()?.step)
    throw new Error(`${what} must be called in the workflow body, not inside a @DurableStep`);
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
  if (rec && Date.parse(rec.output as string) <= run.dbNow()) return;
  await run.fenced(async () => {
    run.parkedUntil = await run.writes.park(run.fence, {
      at: rec ? (rec.output as string) : null,
      delayMs: rec ? null : ms,
      attemptsDelta: run.progressed ? 0 : -1,
      reason: 'sleeping',
      event: 'run.sleeping',
      payload: { step: index, ms },
      dueRecord: rec ? undefined : { index, name: '$sleep' },
      records: run.takePending(),
    });
    return {};
  }, 'park');
  run.suspend('sleeping');
}

/**
 * `ctx.waitForSignal(name, { timeoutMs })`: two indexes, `$deadline:<name>` (when the wait gives up,
 * database clock, recorded the first time) and `$signal:<name>` (the payload, or the timeout). A
 * signal stored before the wait is consumed at once; otherwise the run parks until the signal wakes
 * it or the deadline passes.
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
    const o = outcome.output as { payload?: unknown; timedOut?: boolean };
    if (o.timedOut) throw new SignalTimeoutError(name, timeoutMs ?? 0);
    return o.payload;
  }
  const got = await run.fenced(
    () => run.writes.consumeSignal(run.fence, name, signalIndex, run.takePending()),
    'consume-signal',
  );
  if (got.consumed) {
    run.remember(signalIndex, `$signal:${name}`, { payload: got.payload });
    return got.payload;
  }
  const due = deadline ? (deadline.output as string | null) : null;
  if (deadline && due !== null && Date.parse(due) <= run.dbNow()) {
    await run.fenced(() =>
      run.lease.writeStep(
        run.fence,
        { step: signalIndex, name: `$signal:${name}`, status: 'done', attempt: run.attempt, item: null },
        [{ index: signalIndex, name: `$signal:${name}`, outputJson: '{"timedOut":true}' }],
        'signal.timed_out',
        { name, step: signalIndex, timeoutMs: timeoutMs ?? null },
        true,
      ),
    );
    run.remember(signalIndex, `$signal:${name}`, { timedOut: true });
    throw new SignalTimeoutError(name, timeoutMs ?? 0);
  }
  await run.fenced(async () => {
    run.parkedUntil = await run.writes.park(run.fence, {
      at: due,
      delayMs: deadline ? null : (timeoutMs ?? null),
      attemptsDelta: run.progressed ? 0 : -1,
      reason: `waiting for signal "${name}"`,
      event: 'run.waiting_for_signal',
      payload: { name, timeoutMs: timeoutMs ?? null },
      dueRecord: deadline ? undefined : { index: deadlineIndex, name: `$deadline:${name}` },
      records: run.takePending(),
    });
    return {};
  }, 'park');
  return run.suspend(`waiting for signal "${name}"`);
}
