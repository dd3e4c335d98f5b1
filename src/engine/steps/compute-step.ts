import type { StepMetadata } from '../../interfaces/step-options.interface';
import { encodeOutput, encodeValue, UNDEFINED_META } from '../../util/codec';
import { argsJson, callFingerprint } from '../call-fingerprint';
import { crashArmed, crashPoint } from '../crash-points';
import { flushBeforeCall } from '../held-commit';
import { pauseHooked } from '../pause-points';
import { AttemptStop, attemptTimeout, lazySignal, settleOrAbandon, withRetry } from '../retry';
import { StepTimeoutError } from '../../errors/step-timeout.error';
import type { WireGate } from '../wire/wire-gate';
import type { TrackedBody } from '../live-calls';
import { eventPayload } from '../../store/event-payload';
import { errorFromStored, markStepFailure } from '../stored-error';
import { gated } from '../wire/wire-gate';
import { cursorAt, goLive, StepEnv } from './step-env';
import { admit, BudgetWait, parkForBudget } from './budget';
import { usedTokens } from '../../store/run-state/budget-charge';
import { countFailure, recordedFailures, spentAttempts, storedStepError } from './step-attempts';

const noop = (): void => undefined;

/** Token usage and provider request id of a model step, kept in the checkpoint's meta. */
function modelMeta(output: unknown): { usage: unknown; requestId: unknown } | null {
  if (!output || typeof output !== 'object') return null;
  const o = output as Record<string, unknown>;
  const requestId = o.requestId ?? o.request_id ?? o.id;
  if (o.usage === undefined && requestId === undefined) return null;
  return { usage: o.usage ?? null, requestId: requestId ?? null };
}

/**
 * One `@DurableStep` call inside a run (compute, model or tool): the recorded result on replay (in its
 * recorded delivery order), else the step executed and committed with one fenced statement.
 */
export async function executeStep(
  env: StepEnv,
  meta: StepMetadata,
  call: () => unknown,
  args: unknown[] = [],
): Promise<unknown> {
  // The index is taken when the call is made, before any await (a park's): replay takes it there too.
  const index = env.log.allocIndex();
  const parking = env.control.checkNewCall();
  if (parking) await parking;
  const fingerprint = callFingerprint(meta.name, argsJson(args));
  const rec = env.log.recordedAt(index, meta.name, fingerprint);
  if (rec) {
    await env.log.replayed(index);
    if (rec.failed) throw errorFromStored(rec.output);
    return rec.output;
  }
  const live = goLive(env, index, meta.name);
  if (live) await live;
  const run = () => runStep(env, meta, index, call, fingerprint);
  const running = env.observers ? env.observers.step(env.stepInfo(index, meta.name, meta.kind), run) : run();
  if (!meta.budget)
    return env.control.track(running.catch((err) => failed(env, meta, index, fingerprint, err)));
  // A call over its budget leaves the tracked promise as a value, so that the park (which waits for
  // the run's live calls, this one settled) can follow outside it.
  const settled = env.control.track(
    running.catch((err) => (err instanceof BudgetWait ? err : failed(env, meta, index, fingerprint, err))),
  );
  return settled.then((v) => (v instanceof BudgetWait ? parkForBudget(env, meta, index, v) : v));
}

/**
 * A step that failed for good in this claim (retries spent, or an error that is not retried): the
 * workflow gets the stored form of the error, and that failure is recorded at the step's index by the
 * next write, so a replay throws the same error at the same point instead of running the step again
 * (a workflow that caught it went on). When the run stopped (lease lost, cancel, drain), the workflow
 * gets the stop's error and nothing is recorded.
 */
export async function failed(
  env: StepEnv,
  meta: { readonly name: string },
  index: number,
  fingerprint: string | null,
  err: unknown,
): Promise<never> {
  if (env.control.stop) throw env.control.error ?? err;
  const stored = encodeValue(storedStepError(err), `error of step "${meta.name}"`, Number.MAX_SAFE_INTEGER);
  const seq = env.log.takeSeq();
  const event = {
    step: index,
    name: meta.name,
    error: String(stored.value && (stored.value as { message?: unknown }).message),
  };
  const metaJson = `{"failed":true,"event":${eventPayload(env.options, 'step.failed', event)}}`;
  env.log.addPending({
    index,
    name: meta.name,
    outputJson: stored.json,
    metaJson,
    seq,
    fingerprint,
    failure: true,
  });
  await env.log.deliverLive(seq);
  throw markStepFailure(errorFromStored(stored.value), index);
}

/** Marks a model/tool step `started` (fenced) before it runs, carrying values still pending. */
async function markStarted(env: StepEnv, meta: StepMetadata, index: number): Promise<void> {
  const prior = env.cursor;
  const resumed = prior.step === index && prior.name === meta.name && prior.status === 'started';
  const position = resumed
    ? { item: prior.item, partial: prior.partial }
    : { item: null, partial: undefined };
  const started = cursorAt(env, index, meta.name, 'started', position);
  const event = meta.kind === 'model' ? 'model.call_started' : 'step.started';
  const payload = { step: index, name: meta.name };
  const records = env.log.takePending();
  await env.fenced(
    () => env.store.writeStep(env.fence, started, records, event, payload, false),
    event,
    records,
  );
}

/**
 * Executes a step not yet recorded: `started` mark (model/tool), the call with retries (its failed
 * attempts counted across claims, see step-attempts.ts), the commit.
 */
async function runStep(
  env: StepEnv,
  meta: StepMetadata,
  index: number,
  call: () => unknown,
  fingerprint: string | null,
): Promise<unknown> {
  // A step commit held for the finish is durable before this step's body (or its budget) is reached.
  const held = flushBeforeCall(env);
  if (held) await held;
  const policy = { ...env.options.defaultRetry, ...meta.retry };
  // Attempts an earlier claim made count: spent, the step fails as the policy failed it, not run again.
  const prior = recordedFailures(env, index, meta.name);
  let failures = prior?.count ?? 0;
  if (prior && failures >= policy.maxAttempts) throw spentAttempts(prior);
  // Every attempt is a call the provider counts: each one is admitted on the budget first (the first
  // before the `started` mark, so a run parked over budget did not start the step).
  let useId: string | null = meta.budget ? await admit(env, meta, index) : null;
  if (meta.kind !== 'compute') await markStarted(env, meta, index);
  let previous: TrackedBody<unknown> | null = null;
  let [attempts, tries] = [0, 0];
  const attempt = async () => {
    // A timed-out attempt may still run: the next starts once it settled, or after 5 s (it is abandoned);
    // none once the run stopped or its late calls were given up on meanwhile (lateCallGraceMs).
    if (previous) await settleOrAbandon(previous, () => env.control.refusal(`step ${meta.name}`));
    if (meta.budget && attempts++ > 0) useId = await admit(env, meta, index);
    // A frame per attempt: values drawn inside the body are the same on every retry.
    const frame = env.frame({ index, name: meta.name, derived: 0, attempt: ++tries });
    const paused = env.pause('before-call', `step:${meta.name}`);
    if (paused) await paused;
    const renewing = env.lease.ensure(`step ${meta.name}`);
    if (renewing) await renewing;
    // The body is tracked on its own (trackBody): live until it settles or is abandoned.
    frame.gate = env.lease.gate(`step ${meta.name}`); // the fenced transport, as for commands
    const stop = new AttemptStop(); // this attempt's: its timeout, or the engine giving up on it
    frame.signal = lazySignal(env.control.signal, stop.signal); // made when the body first reads it
    const giveUp = (err: Error): void => {
      // Given up on: its signal fires, its requests and its calls on the run are refused from now on.
      stop.stop(err);
      (frame.gate as WireGate | undefined)?.revoke(err);
      frame.revoked = err;
    };
    const body = env.control.trackBody(
      gated(frame, () => Promise.resolve().then(call)),
      giveUp,
      `step ${meta.name}`,
    );
    previous = body;
    const ms = attemptTimeout(meta.timeoutMs, env.options.defaultTimeoutMs);
    try {
      return await stop.wait(body.promise, ms, meta.name, env.control.signal);
    } catch (err) {
      if (err instanceof StepTimeoutError) {
        giveUp(err);
        void settleOrAbandon(body); // no longer holds the run once its grace is over
      }
      failures = await countFailure(env, meta.name, index, err, failures); // durable before a retry
      throw err;
    }
  };
  const output = await withRetry(policy, env.control.signal, attempt, failures + 1);
  if (meta.kind === 'model') crashPoint('after-model-output', index);
  env.control.checkActive(false);
  // A step that returns nothing (undefined) records null with a mark: replay returns undefined again.
  const { json, value } = encodeOutput(
    output,
    `output of step "${meta.name}"`,
    env.options.limits.maxOutputBytes,
  );
  const usage = meta.kind === 'model' ? modelMeta(output) : null;
  const tokens = useId === null ? null : usedTokens(output);
  // The call's real usage replaces its estimate, beside the commit (a crash in between leaves the estimate).
  const correcting = tokens === null ? null : env.store.correctBudget(useId!, tokens).catch(noop);
  const metaJson = output === undefined ? UNDEFINED_META : usage && JSON.stringify(usage);
  const done = cursorAt(env, index, meta.name, 'done');
  const seq = env.log.takeSeq();
  const checkpoint = { index, name: meta.name, outputJson: json, metaJson, seq, fingerprint };
  const payload = { step: index, name: meta.name, kind: meta.kind, ...usage };
  if (mayHold(env, index)) {
    // Perhaps the run's last step: its commit may ride on the finish (HeldStep).
    if (correcting) await correcting;
    env.control.progressed = true;
    env.held.hold({ index, checkpoint, cursor: done, payload });
    await env.log.deliverLive(seq);
    return value;
  }
  const records = env.log.takePending();
  const writes = [...records, checkpoint];
  crashPoint('before-step-commit', index);
  try {
    await env.fenced(
      () => env.store.writeStep(env.fence, done, writes, 'run.checkpoint_saved', payload, true),
      'run.checkpoint_saved',
      records,
    );
  } catch (err) {
    env.log.abandon(seq);
    throw err;
  }
  if (correcting) await correcting;
  crashPoint('after-step-commit', index);
  env.control.progressed = true;
  await env.log.deliverLive(seq);
  // The stored form (the codec's decode), so the first execution sees exactly what every replay will
  // see. This index is never read again in this claim, so nothing needs to be remembered.
  return value;
}

/**
 * A step's commit may be held for the finish when nothing else of the run is under way: this step is
 * its only live call and no wait is pending (anything the workflow does next writes it first). Not in
 * a cleanup, nor where a test watches the moment between the commit and the finish (a pause hook, an
 * armed `after-step-commit`), nor with observers (a step's span and metrics say `committed` when it
 * returns: a held commit could still fail after that).
 */
function mayHold(env: StepEnv, index: number): boolean {
  const { control } = env;
  return (
    !env.observers &&
    control.live === 1 &&
    control.calls.size === 1 &&
    env.board.size === 0 &&
    !control.inCleanup &&
    !control.stop &&
    !pauseHooked() &&
    !crashArmed('after-step-commit', index)
  );
}
