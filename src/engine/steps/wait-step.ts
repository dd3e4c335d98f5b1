import { DurableUsageError } from '../../errors/durable-usage.error';
import { SignalTimeoutError } from '../../errors/signal-timeout.error';
import type { WaitForSignalOptions } from '../../interfaces/command.interface';
import { decodeStored } from '../../util/codec';
import { runStorage } from '../run-storage';
import type { StepEnv } from './step-env';

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
 * `ctx.sleep(ms)`: a timer, as `setTimeout` is. Called, it records its due time (`$due` at
 * `sleepDueIndex`, the run's database clock + ms) and registers with the wait board; the run goes on
 * with its other branches. Its firing (`$sleep` at its own position: the due time, delivered in order)
 * is recorded when the time passed, whether or not anything awaits it. The run parks only when it is
 * blocked on its waits (WaitBoard). A `$sleep` without `$due` is the record of a park of the code
 * before this (written at the park, with the due time): it is over once that time passed.
 */
export async function sleepStep(env: StepEnv, ms: number): Promise<void> {
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0)
    misuse(env, `ctx.sleep(ms): ms must be a finite number >= 0, got ${String(ms)}`);
  notInStep(env, 'ctx.sleep()');
  env.control.checkActive();
  const index = env.log.allocIndex();
  const rec = env.log.recordedAt(index, '$sleep');
  const dueRec = env.log.recordedAt(sleepDueIndex(index), '$due');
  if (rec) {
    await env.log.replayed(index);
    // Fired; or a park record of the code before the wait board whose time has passed.
    if (dueRec || Date.parse(rec.output as string) <= env.dbNow()) return;
    await env.board.wait({ index, record: '$sleep', signal: null, due: rec.output as string });
    return;
  }
  const due = dueRec ? (dueRec.output as string) : new Date(env.dbNow() + ms).toISOString();
  if (!dueRec)
    env.log.addPending({ index: sleepDueIndex(index), name: '$due', outputJson: JSON.stringify(due) });
  await env.board.wait({ index, record: '$sleep', signal: null, due });
}

/**
 * Where a sleep at `index` records its due time: a negative position of its own, below the patch
 * markers' (patchIndex), outside the sequence steps and commands take, so a sleep takes one position as
 * it always did (command keys after it do not move).
 */
export const sleepDueIndex = (index: number): number => -(2 ** 30) - 1 - index;

/** A recorded deadline as the database reads it: null when the wait has none. */
function recordedDeadline(output: unknown): string | null {
  return typeof output === 'string' && output !== 'infinity' ? output : null;
}

/**
 * `ctx.waitForSignal(name, { timeoutMs })`: a read from the run's mailbox of signals `name`, two
 * indexes: `$deadline:<name>` (when the wait gives up, recorded when it is called) and `$signal:<name>`
 * (the payload, or the timeout, delivered in order). It registers with the wait board: the oldest
 * stored signal of the name goes to the first pending wait for it; a signal sent while the run parks or
 * runs is never lost (SETTLE_WAITS_SQL).
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
  let due: string | null;
  if (deadline) due = recordedDeadline(deadline.output);
  else {
    due = timeoutMs === undefined ? null : new Date(env.dbNow() + timeoutMs).toISOString();
    env.log.addPending({ index: deadlineIndex, name: `$deadline:${name}`, outputJson: JSON.stringify(due) });
  }
  const record = `$signal:${name}`;
  const got = await env.board.wait({ index: signalIndex, record, signal: name, due, child });
  if (got.outcome === 'timed_out') throw new SignalTimeoutError(name, timeoutMs ?? 0);
  return decodeStored(got.payload); // as the replay of this wait will read it
}
