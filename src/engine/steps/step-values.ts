import { createHash } from 'node:crypto';
import { encodeValue, toStoredJson } from '../../util/codec';
import { requireShortText, requireTags } from '../../util/run-keys';
import { runStorage } from '../run-storage';
import { flushBeforeCall } from '../held-commit';
import { generationPart } from '../../store/run-state/fence';
import { cursorAt, goLive, StepEnv } from './step-env';
import { misuse, notInStep } from './wait-step';

/**
 * `ctx.now()/uuid()/random()`. In the workflow body: recorded at the next index the first time (written
 * by the next fenced write), read back on replay. Inside a step: derived from (run, step index, call
 * number), identical on every retry of that step with no write at all.
 */
export function recordValue<T>(env: StepEnv, name: string, make: () => T, derive: (seed: Buffer) => T): T {
  const frame = runStorage.getStore();
  if (frame?.step) {
    const seed = createHash('sha256')
      .update(
        `${env.runId}${generationPart(env.fence.generation)}:${frame.step.index}:${frame.step.derived++}`,
      )
      .digest();
    return derive(seed);
  }
  env.control.checkActive();
  const index = env.log.allocIndex();
  const rec = env.log.recordedAt(index, name);
  if (rec) return rec.output as T;
  if (env.replayOnly) throw env.replayOnly.reached(index, name);
  const { json, value } = encodeValue(make(), `value of ${name}`, env.options.limits.maxOutputBytes);
  env.log.addPending({ index, name, outputJson: json });
  return value as T;
}

/** `ctx.progress(item, partial)`: moves the intra-step cursor (fenced, no event). */
export async function progress(env: StepEnv, item: number, partial: unknown): Promise<void> {
  const frame = runStorage.getStore();
  if (frame?.revoked) throw frame.revoked; // an abandoned body: its cursor is no longer the run's
  const step = frame?.step;
  if (!step || step.command)
    misuse(
      env,
      `ctx.progress() must be called inside a @DurableStep method${step ? `, not in the body of ${step.name}` : ''}`,
    );
  env.control.checkActive(false);
  // Refused here (once, not retried) rather than by PostgreSQL on every claim.
  const stored = encodeValue(
    partial,
    `ctx.progress() partial of step "${step.name}"`,
    env.options.limits.maxOutputBytes,
  );
  // The stored form: a retry in this claim reads it back with resumePoint() as a later claim would.
  const cursor = cursorAt(env, step.index, step.name, 'started', { item, partial: stored.value });
  await env.fenced(() => env.store.progress(env.fence, cursor), 'progress');
  env.cursor = cursor;
}

/** `ctx.resumePoint()`: the intra-step cursor of this step left by an earlier attempt, if any. */
export function resumePoint(env: StepEnv): { item: number; partial: unknown } | null {
  const step = runStorage.getStore()?.step;
  const c = env.cursor;
  if (
    !step ||
    step.command ||
    c.step !== step.index ||
    c.name !== step.name ||
    c.status !== 'started' ||
    c.item === null
  ) {
    return null;
  }
  return { item: c.item, partial: c.partial ?? null };
}

/**
 * `ctx.setTags(tags)`: merges them into the run's tags in a fenced write of its own. Not recorded: a
 * replay writes them again (the same merge), a replay check writes nothing.
 */
export async function setTagsStep(env: StepEnv, tags: unknown): Promise<void> {
  let json: string | null = null;
  try {
    json = requireTags(tags, 'tags', false);
  } catch (err) {
    misuse(env, `ctx.setTags(tags): ${(err as Error).message}`);
  }
  if (runStorage.getStore()?.step)
    misuse(env, 'ctx.setTags() must be called in the workflow body, not inside a step');
  env.control.checkActive();
  if (env.replayOnly || json === null) return;
  await env.control.track(env.fenced(() => env.store.setTags(env.fence, json!), 'set tags'));
}

/** The topic and the stored form of an entry; a bad one stops the run with a usage error. */
function entryOf(env: StepEnv, topic: unknown, data: unknown): { topic: string; dataJson: string } {
  try {
    const name = requireShortText(topic, 'topic');
    const { json } = encodeValue(
      data === undefined ? null : data,
      `data of ctx.emit('${name}')`,
      env.options.limits.maxOutputBytes,
    );
    return { topic: name, dataJson: json };
  } catch (err) {
    return misuse(env, `ctx.emit(topic, data): ${(err as Error).message}`);
  }
}

/**
 * `ctx.emit(topic, data)`: appends an entry to the run's stream in a fenced write of its own.
 * - In the workflow body it takes the next index and is recorded there (`$emit:<topic>`, delivered in
 *   order like a step's result): a replay finds the record and writes nothing, so an entry is never
 *   written twice, and the replay check covers it.
 * - In a step's body it takes no index: the entry carries the step and its attempt. A step cut off
 *   and run again writes the entries of its new attempt; readers see both, in order, and
 *   `StreamEntry.superseded` marks those of attempts a later one replaced.
 * In a command's body it is refused (a command's body is the side effect itself).
 */
export async function emitStep(env: StepEnv, topic: unknown, data: unknown): Promise<void> {
  const frame = runStorage.getStore();
  if (frame?.revoked) throw frame.revoked; // an abandoned body writes nothing more
  const step = frame?.step;
  if (step?.command) misuse(env, `ctx.emit() must not be called in the body of ${step.name}`);
  const entry = entryOf(env, topic, data);
  if (step) {
    env.control.checkActive(false);
    if (env.replayOnly) return;
    await env.fenced(
      () =>
        env.store.emit(env.fence, {
          ...entry,
          step: { index: step.index, attempt: step.attempt ?? 1 },
          records: [],
        }),
      'stream.emit',
    );
    return;
  }
  const index = env.log.allocIndex();
  const parking = env.control.checkNewCall();
  if (parking) await parking;
  const name = `$emit:${entry.topic}`;
  if (env.log.recordedAt(index, name)) return env.log.replayed(index);
  return env.control.track(emitLive(env, index, name, entry));
}

async function emitLive(
  env: StepEnv,
  index: number,
  name: string,
  entry: { topic: string; dataJson: string },
): Promise<void> {
  const live = goLive(env, index, name);
  if (live) await live;
  const held = flushBeforeCall(env); // a step's commit held for the finish: durable before the entry
  if (held) await held;
  env.control.checkActive();
  const seq = env.log.takeSeq();
  const records = env.log.takePending();
  try {
    await env.fenced(
      () => env.store.emit(env.fence, { ...entry, record: { index, name, seq }, records }),
      'stream.emit',
      records,
    );
  } catch (err) {
    env.log.abandon(seq);
    throw err;
  }
  await env.log.deliverLive(seq);
}

/**
 * `ctx.continueAsNew(input)`: waits for the run's live calls (as a park does), then one fenced statement
 * starts the run's next generation (CONTINUE_RUN_SQL: input replaced, history deleted, due at once);
 * this claim stops there. A replay that reaches it (the statement did not commit) does it again.
 */
export async function continueAsNewStep(env: StepEnv, input: unknown): Promise<never> {
  notInStep(env, 'ctx.continueAsNew()');
  let inputJson = '';
  try {
    inputJson = toStoredJson(input, 'input of ctx.continueAsNew()', env.options.limits.maxInputBytes);
  } catch (err) {
    misuse(env, `ctx.continueAsNew(input): ${(err as Error).message}`);
  }
  env.control.checkActive();
  const live = goLive(env, env.log.allocIndex(), '$continue');
  if (live) await live;
  await env.control.quiesce();
  await env.held.flush(); // a step's commit held for the finish, and a cancel it reported, come first
  env.control.checkActive();
  const { generation } = await env.fenced(
    () => env.store.continueAsNew(env.fence, inputJson),
    'continue as new',
  );
  const reason = `continued as new (generation ${generation})`;
  throw env.control.halt({ kind: 'parked', reason, until: new Date(env.dbNow()), forOperator: false });
}
