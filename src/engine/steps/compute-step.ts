import type { StepMetadata } from '../../interfaces/step-options.interface';
import { toStoredJson } from '../../util/json';
import { argsJson, callFingerprint } from '../call-fingerprint';
import { crashPoint } from '../crash-points';
import { withRetry, withTimeout } from '../retry';
import { runStorage } from '../run-storage';
import { cursorAt, goLive, StepEnv } from './step-env';

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
  env.control.checkActive();
  const index = env.log.allocIndex();
  const fingerprint = callFingerprint(meta.name, argsJson(args));
  const rec = env.log.recordedAt(index, meta.name, fingerprint);
  if (rec) {
    await env.log.replayed(index);
    return rec.output;
  }
  const live = goLive(env);
  if (live) await live;
  if (!env.observers) return env.control.track(runStep(env, meta, index, call, fingerprint));
  return env.control.track(
    env.observers.step(env.stepInfo(index, meta.name, meta.kind), () =>
      runStep(env, meta, index, call, fingerprint),
    ),
  );
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
  await env.fenced(
    () => env.store.writeStep(env.fence, started, env.log.takePending(), event, payload, false),
    event,
  );
}

/** Executes a step not yet recorded: `started` mark (model/tool), the call with retries, the commit. */
async function runStep(
  env: StepEnv,
  meta: StepMetadata,
  index: number,
  call: () => unknown,
  fingerprint: string | null,
): Promise<unknown> {
  if (meta.kind !== 'compute') await markStarted(env, meta, index);
  const policy = { ...env.options.defaultRetry, ...meta.retry };
  const frame = env.frame({ index, name: meta.name, derived: 0 });
  const output = await withRetry(policy, env.control.signal, async () => {
    const paused = env.pause('before-call', `step:${meta.name}`);
    if (paused) await paused;
    const renewing = env.lease.ensure(`step ${meta.name}`);
    if (renewing) await renewing;
    return runStorage.run(frame, () => withTimeout(Promise.resolve().then(call), meta.timeoutMs, meta.name));
  });
  if (meta.kind === 'model') crashPoint('after-model-output', index);
  env.control.checkActive(false);
  // A step that returns nothing records null: its effect happened, and replay returns the same.
  const json = toStoredJson(
    output === undefined ? null : output,
    `output of step "${meta.name}"`,
    env.options.limits.maxOutputBytes,
  );
  const usage = meta.kind === 'model' ? modelMeta(output) : null;
  const metaJson = usage && JSON.stringify(usage);
  const done = cursorAt(env, index, meta.name, 'done');
  const seq = env.log.takeSeq();
  const writes = [
    ...env.log.takePending(),
    { index, name: meta.name, outputJson: json, metaJson, seq, fingerprint },
  ];
  const payload = { step: index, name: meta.name, kind: meta.kind, ...usage };
  crashPoint('before-step-commit', index);
  try {
    await env.fenced(
      () => env.store.writeStep(env.fence, done, writes, 'run.checkpoint_saved', payload, true),
      'run.checkpoint_saved',
    );
  } catch (err) {
    env.log.abandon(seq);
    throw err;
  }
  crashPoint('after-step-commit', index);
  env.control.progressed = true;
  await env.log.deliverLive(seq);
  // The JSON round trip, so the first execution sees exactly what every replay will see. This index
  // is never read again in this claim, so nothing needs to be remembered.
  return JSON.parse(json);
}
