import { WORKFLOW_METADATA } from '../../durable-execution.constants';
import { ChildRunError, ChildRunEnd } from '../../errors/child-run.error';
import { SignalTimeoutError } from '../../errors/signal-timeout.error';
import type { ChildRun, StartChildOptions, WaitForChildOptions } from '../../interfaces/child.interface';
import type { WorkflowClass } from '../../interfaces/run.interface';
import type { WorkflowMetadata } from '../../interfaces/step-options.interface';
import { requireInt4 } from '../../util/arguments';
import { toStoredJson } from '../../util/codec';
import { concurrencyKeyOf, requireShortText } from '../../util/run-keys';
import { argsJson, callFingerprint } from '../call-fingerprint';
import { crashPoint } from '../crash-points';
import { flushBeforeCall } from '../held-commit';
import { goLive, StepEnv } from './step-env';
import { misuse, notInStep, waitForSignalStep } from './wait-step';

/** The name a child's end is stored under on its parent (signal and wait checkpoints). */
export const childSignal = (childId: string): string => `$child:${childId}`;

/** A child's start as the parent records it: what it asks for, checked before anything is written. */
interface ChildPlan {
  kind: string;
  meta: WorkflowMetadata | undefined;
  inputJson: string;
  parentClose: 'cancel' | 'abandon';
  priority: number;
  maxAttempts: number;
  concurrencyKey: string | null;
}

/** Checks a child's kind, input and options; a bad one stops the parent with a usage error. */
function plan(env: StepEnv, target: unknown, input: unknown, o: StartChildOptions): ChildPlan {
  try {
    const classMeta =
      typeof target === 'function'
        ? (Reflect.getMetadata(WORKFLOW_METADATA, target) as WorkflowMetadata | undefined)
        : undefined;
    if (typeof target === 'function' && !classMeta?.kind)
      throw new Error(`${target.name || 'the class'} has no @DurableWorkflow(kind) decorator`);
    const kind = classMeta?.kind ?? requireShortText(target, 'kind');
    if (classMeta?.debounce) throw new Error(`kind "${kind}" is debounced: its runs cannot be children`);
    // By name: the kind as this worker registers it (its key function and attempts), as a class would give.
    const meta = classMeta ?? env.kindMeta?.(kind);
    if (o.parentClose !== undefined && o.parentClose !== 'cancel' && o.parentClose !== 'abandon')
      throw new Error(`parentClose must be 'cancel' or 'abandon', got ${String(o.parentClose)}`);
    return {
      kind,
      meta,
      inputJson: toStoredJson(input, `input of child run kind "${kind}"`, env.options.limits.maxInputBytes),
      parentClose: o.parentClose ?? 'cancel',
      priority: requireInt4(o.priority ?? 0, 'priority'),
      maxAttempts: requireInt4(
        o.maxAttempts ?? meta?.maxAttempts ?? env.options.defaultMaxAttempts,
        'maxAttempts',
        1,
      ),
      concurrencyKey: concurrencyKeyOf(meta, input, o.concurrencyKey),
    };
  } catch (err) {
    return misuse(env, `ctx.startChild(): ${(err as Error).message}`);
  }
}

/**
 * `ctx.startChild(kind, input)`: the first time, one fenced statement inserts the child (keyed by parent
 * and step index: it exists once, whatever happens to the parent after) and records its id at this
 * step; a replay returns the recorded id and starts nothing. The parent does not wait.
 */
export async function startChildStep(
  env: StepEnv,
  target: string | WorkflowClass,
  input: unknown,
  options: StartChildOptions = {},
): Promise<ChildRun> {
  const index = env.log.allocIndex();
  notInStep(env, 'ctx.startChild()');
  const parking = env.control.checkNewCall();
  if (parking) await parking;
  const p = plan(env, target, input, options ?? {});
  const name = `$child:${p.kind}`;
  const fingerprint = callFingerprint(name, argsJson([input]));
  const rec = env.log.recordedAt(index, name, fingerprint);
  if (rec) {
    await env.log.replayed(index);
    return { runId: (rec.output as { runId: string }).runId, kind: p.kind };
  }
  return env.control.track(startLive(env, p, index, name, fingerprint));
}

async function startLive(
  env: StepEnv,
  p: ChildPlan,
  index: number,
  name: string,
  fingerprint: string | null,
): Promise<ChildRun> {
  const live = goLive(env, index, name);
  if (live) await live;
  const held = flushBeforeCall(env); // a step's commit held for the finish: durable before a child starts
  if (held) await held;
  env.control.checkActive();
  const seq = env.log.takeSeq();
  const records = env.log.takePending();
  let started;
  try {
    started = await env.fenced(
      () => env.store.startChild(env.fence, { ...p, index, name, seq, fingerprint, records }),
      'child.started',
      records,
    );
  } catch (err) {
    env.log.abandon(seq);
    throw err;
  }
  crashPoint('after-child-start', index);
  env.control.progressed = true;
  await env.log.deliverLive(seq);
  return { runId: started.childId, kind: p.kind };
}

/**
 * `ctx.waitForChild(child)`: a wait for the signal its end stores on the parent (`$child:<id>`, written
 * by the statement that ends the child): the child's output, or ChildRunError when it did not
 * succeed or `timeoutMs` passed (then the child is cancelled). The parent holds no worker meanwhile.
 */
export async function waitForChildStep(
  env: StepEnv,
  child: ChildRun,
  options: WaitForChildOptions = {},
): Promise<unknown> {
  if (!child || typeof child.runId !== 'string' || typeof child.kind !== 'string')
    misuse(env, 'ctx.waitForChild(child): child must be what ctx.startChild() returned');
  let ended: { status: Exclude<ChildRunEnd, 'timed_out'> | 'succeeded'; output: unknown; error: unknown };
  const reason = `its parent run stopped waiting after ${options?.timeoutMs} ms`;
  try {
    const wait = { timeoutMs: options?.timeoutMs };
    const cancel = { runId: child.runId, cancelReason: reason };
    ended = (await waitForSignalStep(env, childSignal(child.runId), wait, true, cancel)) as typeof ended;
  } catch (err) {
    if (!(err instanceof SignalTimeoutError)) throw err;
    // Recorded: the parent gave up, after the child's cancel was requested. Asked again on every replay
    // (a no-op once done) for a timeout recorded before the cancel came first (older records). Not
    // awaited before the rejection: replay delivers the next recorded result a turn later, and a write
    // here would let it overtake this timeout. Tracked: the run parks or ends only once it is done.
    if (!env.replayOnly) {
      const cancel = env.fenced(
        () => env.store.cancelChild(env.fence, child.runId, reason),
        'cancel of a child run',
      );
      void env.control.track(cancel, false).catch(() => undefined);
    }
    throw new ChildRunError(child.runId, child.kind, 'timed_out', null);
  }
  if (ended.status === 'succeeded') return ended.output;
  throw new ChildRunError(child.runId, child.kind, ended.status, ended.error as ChildRunError['childError']);
}
