import type { CommandContext, CommandMetadata } from '../../interfaces/command.interface';
import { jsonEqual } from '../../util/json';
import { toStoredJson } from '../../util/codec';
import { argsJson, callFingerprint } from '../call-fingerprint';
import { crashPoint } from '../crash-points';
import { CallAbandonedError } from '../../errors/call-abandoned.error';
import { StepTimeoutError } from '../../errors/step-timeout.error';
import { anySignal, attemptTimeout, withRetry, withTimeout } from '../retry';
import { serializeError } from '../serialize-error';
import {
  Cmd,
  commandFailure,
  commandKey,
  commandResultJson,
  Outcome,
  ownKeyOf,
  recordOutcome,
  replayOutcome,
  toolCallOf,
} from './command-outcome';
import { gated, type WireGate } from '../wire/wire-gate';
import { isDefinite, Lookup, parkCommand, resolveInDoubt, settleUncertain } from './command-doubt';
import { commandFence } from './command-fence';
import { flushBeforeCall } from '../held-commit';
import { cursorAt, goLive, StepEnv } from './step-env';
import { misuse } from './wait-step';
import { failed } from './compute-step';
import { errorFromStored } from '../stored-error';

/**
 * One `@IdempotentCommand` call inside a run: replay a recorded outcome, settle a command whose outcome
 * a crash hid (by policy), park for approval, or reserve → dispatch with the key → record.
 */
export async function executeCommand(
  env: StepEnv,
  meta: CommandMetadata,
  args: unknown,
  call: (ctx: CommandContext) => unknown,
  lookup?: Lookup,
  // Taken when the call is made, before any await (an observer's, a park's): replay takes it there too.
  index = env.log.allocIndex(),
): Promise<unknown> {
  const parking = env.control.checkNewCall();
  if (parking) await parking;
  const stepName = `command:${meta.name}`;
  const { own, problem } = ownKeyOf(meta, args);
  if (problem) misuse(env, problem);
  const key = commandKey(env.runId, index, toolCallOf(meta, args), meta.name, env.fence.generation, own);
  if (own !== undefined) {
    // A key of its own names one command of the run: a second call with it would share its outcome.
    const at = env.control.ownKeys.get(key) ?? env.commands.get(key)?.index;
    if (at !== undefined && at !== index)
      misuse(env, `command "${meta.name}": key "${own}" is already used at step ${at} of this run`);
    env.control.ownKeys.set(key, index);
  }
  const payloadJson = toStoredJson(
    args ?? null,
    `arguments of command "${meta.name}"`,
    env.options.limits.maxInputBytes,
  );
  const fingerprint = callFingerprint(stepName, argsJson(JSON.parse(payloadJson)));
  const rec = env.log.recordedAt(index, stepName, fingerprint);
  if (rec) {
    await env.log.replayed(index);
    if (rec.failed) throw errorFromStored(rec.output); // abandoned after run() returned (see dispatch)
    return replayOutcome(meta, key, rec.output);
  }
  await goLive(env, index, stepName);
  const held = flushBeforeCall(env); // a step's commit held for the finish: durable before a lookup or send
  if (held) await held;

  const keysFrom = env.fence.keysFrom;
  const sent = keysFrom
    ? commandKey(env.runId, index, toolCallOf(meta, args), meta.name, 0, own, keysFrom)
    : key;
  const cmd: Cmd = { key, sent, index, name: meta.name, payloadJson, fingerprint };
  const row = env.commands.get(key);
  // The same command reserved at this step under another key (another tool call): sending this one
  // would forget that one, which may have been sent or approved.
  if (!row && env.log.reservedAt(index)) throw env.log.mismatch(index, stepName, 'is another tool call');
  // A row reserved with other arguments is another call: the workflow is not deterministic. Stop
  // before asking the target about it or sending anything under its key.
  if (row && row.payload !== undefined && !jsonEqual(row.payload, JSON.parse(payloadJson))) {
    const detail = 'was called with other arguments than its reserved command';
    throw env.log.mismatch(index, stepName, detail);
  }
  const record = (o: Outcome) => recordOutcome(env, meta, cmd, o);

  if (row) {
    switch (row.status) {
      case 'succeeded':
        await record({
          status: 'succeeded',
          resultJson: JSON.stringify(row.result ?? null), // already decoded (load-replay)
          event: 'tool.command_succeeded',
          payload: { recovered: true },
        });
        return row.result ?? null;
      case 'failed':
      case 'rejected':
        await record({
          status: row.status,
          error: row.error ?? { message: row.status },
          event: `tool.command_${row.status}`,
        });
        throw commandFailure(meta, key, row.status, row.error ?? { message: row.status });
      case 'awaiting_approval':
        return parkCommand(env, cmd, 'awaiting_approval', `awaiting approval of ${key}`);
      case 'in_doubt':
      case 'pending':
        if (!(row.status === 'pending' && row.resolution === 'retry')) {
          const settled = await resolveInDoubt(env, meta, cmd, lookup, row.error);
          if (settled) return settled.result;
        }
        break;
      // 'approved' falls through to dispatch
    }
  } else if (
    typeof meta.requiresApproval === 'function' ? meta.requiresApproval(args) : meta.requiresApproval
  ) {
    return parkCommand(env, cmd, 'awaiting_approval', `awaiting approval of ${key}`);
  }
  if (env.fence.lookupFirst && meta.inDoubt !== 'retry-with-key' && (!row || row.status === 'approved')) {
    // The database failed over since this run was last claimed: this command may have been reserved (or
    // approved) and sent under a claim whose commits the new primary lost. Settled by its policy before a
    // first send (`retry-with-key` sends again with the same key anyway): `manual` parks, `lookup` asks.
    // An approved row becomes in doubt in the park's own statement (an operator acts before or after it).
    if (meta.inDoubt === 'manual')
      return parkCommand(
        env,
        cmd,
        'in_doubt',
        `command ${key} may have been sent before a failover`,
        0,
        !!row,
      );
    const asked = async () => {
      await reserve(env, meta, cmd);
      return resolveInDoubt(env, meta, cmd, lookup, null);
    };
    const settled = await env.control.track(asked());
    if (settled) return settled.result;
  }
  return env.control.track(dispatch(env, meta, cmd, call, lookup));
}

/** The command reserved (fenced): its row pending under this epoch, the cursor at it. */
async function reserve(env: StepEnv, meta: CommandMetadata, cmd: Cmd): Promise<void> {
  const cursor = cursorAt(env, cmd.index, `command:${meta.name}`, 'started');
  const records = env.log.takePending();
  const { cancelRequested, reserved } = await env.fenced(
    () => env.store.reserveCommand(env.fence, cursor, cmd, records),
    'tool.command_reserved',
    records,
  );
  // A cancel stops the run here (the first stop wins; not in the cleanup after a cancel).
  if (cancelRequested) env.control.halt({ kind: 'cancelled', error: env.control.cancelled() });
  // Settled meanwhile (an operator decided it): never send it again; the next claim replays the
  // decision from the row.
  if (!reserved) env.control.halt({ kind: 'suspended', reason: `command ${cmd.key} was settled meanwhile` });
}

/** Reserve (fenced), then the call with the key and the fencing token, then the outcome recorded. */
async function dispatch(
  env: StepEnv,
  meta: CommandMetadata,
  cmd: Cmd,
  call: (ctx: CommandContext) => unknown,
  lookup: Lookup | undefined,
): Promise<unknown> {
  await reserve(env, meta, cmd);
  env.control.unsent.add(cmd.key); // until the call is made: a run that stops before never sent it
  env.control.checkActive(false); // a cancelled run never calls another command (a drain lets it finish)
  crashPoint('after-command-reserve', cmd.index);
  const policy = { ...env.options.defaultRetry, maxAttempts: 1, ...meta.retry };
  let result: unknown;
  try {
    result = await withRetry(policy, env.control.signal, async () => {
      await env.pause('before-call', `command:${meta.name}`);
      await env.lease.ensure(`command ${cmd.key}`);
      const fence = commandFence(env, cmd.sent);
      // The body runs in a frame of its own: what it draws from the context is derived from the key's
      // index (the same on every send of this key), and it takes no workflow position.
      const frame = env.frame({ index: cmd.index, name: `command:${meta.name}`, derived: 0, command: true });
      // The fenced transport: its requests leave only while the lease holds (checked at the socket).
      frame.gate = env.lease.gate(`command ${cmd.key}`);
      env.control.unsent.delete(cmd.key);
      // Waited for until it settles, its timeout, or until the engine gives up on it (5 s after the run
      // stopped, or once run() returned and `lateCallGraceMs` passed): its signal fires, nothing its body
      // still sends leaves, and the outcome is unknown (in doubt, settled below or by the next claim).
      const stop = new AbortController(); // this attempt's: its timeout, or the run's stop
      const signal = anySignal(env.control.signal, stop.signal);
      const body = env.control.trackBody(
        Promise.resolve(gated(frame, () => call({ idempotencyKey: cmd.sent, signal, fence }))),
        (why) => (stop.abort(why), (frame.gate as WireGate | undefined)?.revoke(why)),
        `command ${cmd.key}`,
      );
      const ms = attemptTimeout(meta.timeoutMs, env.options.defaultTimeoutMs);
      return withTimeout(Promise.race([body.promise, body.abandoned]), ms, meta.name).catch((err) => {
        if (err instanceof StepTimeoutError) body.abandon(err);
        throw err;
      });
    });
  } catch (err) {
    // The run stopped (lease lost, cancel, drain): the row stays pending, in doubt for the next claim.
    if (env.control.stop) throw env.control.error ?? err;
    // Abandoned once run() had returned: the row stays pending (in doubt); the abandonment is recorded
    // at its index, as a step's failure is, so a replay of the run rejects the same call the same way.
    if (err instanceof CallAbandonedError)
      return failed(env, { name: `command:${meta.name}` }, cmd.index, cmd.fingerprint, err);
    const error = serializeError(err);
    if (isDefinite(meta, err)) {
      await recordOutcome(env, meta, cmd, {
        status: 'failed',
        error,
        event: 'tool.command_failed',
        payload: { error: String(error.message ?? '') },
      });
      throw commandFailure(meta, cmd.key, 'failed', error);
    }
    return settleUncertain(env, meta, cmd, error, lookup);
  }
  crashPoint('after-command-dispatch', cmd.index);
  const resultJson = commandResultJson(env, meta, result, 'result');
  await recordOutcome(env, meta, cmd, { status: 'succeeded', resultJson, event: 'tool.command_succeeded' });
  return JSON.parse(resultJson);
}

/**
 * A command called by the workflow (StepHost.executeCommand): its index is taken now, whatever an
 * observer awaits before it calls on, so an observer's timing never moves a command's index (and
 * key). A command recorded there is a replay: no span.
 */
export function commandCall(
  env: StepEnv & { readonly observers?: StepEnv['observers'] },
  meta: CommandMetadata,
  args: unknown,
  call: (ctx: CommandContext) => unknown,
  lookup?: Lookup,
): Promise<unknown> {
  const index = env.log.allocIndex();
  if (!env.observers || env.log.at(index))
    return env.control.calls.calling(executeCommand(env, meta, args, call, lookup, index));
  const info = env.stepInfo(index, meta.name, 'command');
  return env.control.calls.calling(
    env.observers.step(info, () => executeCommand(env, meta, args, call, lookup, index)),
  );
}
