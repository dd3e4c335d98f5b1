import { createHash } from 'node:crypto';
import { DurableUsageError } from '../../errors/durable-usage.error';
import { toStoredJson } from '../../util/json';
import { runStorage } from '../run-storage';
import { cursorAt, StepEnv } from './step-env';

/**
 * `ctx.now()/uuid()/random()`. In the workflow body: recorded at the next index the first time (written
 * by the next fenced write), read back on replay. Inside a step: derived from (run, step index, call
 * number), identical on every retry of that step with no write at all.
 */
export function recordValue<T>(env: StepEnv, name: string, make: () => T, derive: (seed: Buffer) => T): T {
  const frame = runStorage.getStore();
  if (frame?.step) {
    const seed = createHash('sha256')
      .update(`${env.runId}:${frame.step.index}:${frame.step.derived++}`)
      .digest();
    return derive(seed);
  }
  env.control.checkActive();
  const index = env.log.allocIndex();
  const rec = env.log.recordedAt(index, name);
  if (rec) return rec.output as T;
  const value = make();
  env.log.addPending({ index, name, outputJson: JSON.stringify(value) });
  return value;
}

/** `ctx.progress(item, partial)`: moves the intra-step cursor (fenced, no event). */
export async function progress(env: StepEnv, item: number, partial: unknown): Promise<void> {
  const step = runStorage.getStore()?.step;
  if (!step) throw new DurableUsageError('ctx.progress() must be called inside a @DurableStep method');
  env.control.checkActive(false);
  // Refused here (once, not retried) rather than by PostgreSQL on every claim.
  toStoredJson(partial, `ctx.progress() partial of step "${step.name}"`, env.options.limits.maxOutputBytes);
  const cursor = cursorAt(env, step.index, step.name, 'started', { item, partial });
  await env.fenced(() => env.store.progress(env.fence, cursor), 'progress');
  env.cursor = cursor;
}

/** `ctx.resumePoint()`: the intra-step cursor of this step left by an earlier attempt, if any. */
export function resumePoint(env: StepEnv): { item: number; partial: unknown } | null {
  const step = runStorage.getStore()?.step;
  const c = env.cursor;
  if (!step || c.step !== step.index || c.name !== step.name || c.status !== 'started' || c.item === null) {
    return null;
  }
  return { item: c.item, partial: c.partial ?? null };
}
