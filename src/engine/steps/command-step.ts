import { CommandFailedError } from '../../errors/command-failed.error';
import type { CommandContext, CommandMetadata, LookupResult } from '../../interfaces/command.interface';
import { jsonEqual, toStoredJson } from '../../util/json';
import { argsJson, callFingerprint } from '../call-fingerprint';
import { crashPoint } from '../crash-points';
import { isNonRetryable, withRetry } from '../retry';
import { serializeError } from '../serialize-error';
import {
  Cmd,
  commandKey,
  commandResultJson,
  Outcome,
  recordOutcome,
  replayOutcome,
  toolCallOf,
} from './command-outcome';
import { cursorAt, goLive, StepEnv } from './step-env';

type Lookup = (command: string, key: string) => Promise<LookupResult>;

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
): Promise<unknown> {
  env.control.checkActive();
  const index = env.log.allocIndex();
  const stepName = `command:${meta.name}`;
  const key = commandKey(env.runId, index, toolCallOf(meta, args), meta.name);
  const payloadJson = toStoredJson(
    args ?? null,
    `arguments of command "${meta.name}"`,
    env.options.limits.maxInputBytes,
  );
  const fingerprint = callFingerprint(stepName, argsJson(JSON.parse(payloadJson)));
  const rec = env.log.recordedAt(index, stepName, fingerprint);
  if (rec) {
    await env.log.replayed(index);
    return replayOutcome(meta, key, rec.output);
  }
  await goLive(env);

  const cmd: Cmd = { key, index, name: meta.name, payloadJson, fingerprint };
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
          resultJson: JSON.stringify(row.result ?? null),
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
        return replayOutcome(meta, key, { status: row.status, error: row.error });
      case 'awaiting_approval':
        return parkCommand(env, cmd, 'awaiting_approval', `awaiting approval of ${key}`);
      case 'in_doubt':
      case 'pending':
        if (!(row.status === 'pending' && row.resolution === 'retry')) {
          const settled = await resolveInDoubt(env, meta, cmd, lookup);
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
  return env.control.track(dispatch(env, meta, cmd, call));
}

async function resolveInDoubt(
  env: StepEnv,
  meta: CommandMetadata,
  cmd: Cmd,
  lookup?: Lookup,
): Promise<{ result: unknown } | null> {
  if (meta.inDoubt === 'manual') {
    const reason = `command ${cmd.key} is in doubt: resolve it with RunRepository.resolveCommand`;
    return parkCommand(env, cmd, 'in_doubt', reason);
  }
  if (meta.inDoubt === 'retry-with-key') return null;
  return env.control.track(lookupAndRecord(env, meta, cmd, lookup!));
}

/** Asks the target by key; records what it found (`null`: it never saw the key). */
async function lookupAndRecord(
  env: StepEnv,
  meta: CommandMetadata,
  cmd: Cmd,
  lookup: Lookup,
): Promise<{ result: unknown } | null> {
  await env.pause('before-call', `lookup:${meta.name}`);
  await env.lease.ensure(`lookup of ${cmd.key}`);
  const found = await lookup(meta.name, cmd.key);
  if (!found.found) return null;
  const resultJson = commandResultJson(env, meta, found.result, 'lookup result');
  await recordOutcome(env, meta, cmd, {
    status: 'succeeded',
    resultJson,
    event: 'command.resolved',
    payload: { by: 'lookup', found: true },
    resolution: 'lookup',
  });
  return { result: JSON.parse(resultJson) };
}

/**
 * Parks the run for an operator (approval, manual in-doubt). The park is due at once instead when the
 * command was decided or the run cancelled meanwhile (PARK_RUN_SQL): nothing is stranded.
 */
async function parkCommand(
  env: StepEnv,
  cmd: Cmd,
  status: 'awaiting_approval' | 'in_doubt',
  reason: string,
): Promise<never> {
  const event = status === 'in_doubt' ? 'command.in_doubt' : 'command.approval_requested';
  const { key, index, name, payloadJson } = cmd;
  await env.control.quiesce();
  const parked = await env.fenced(
    () =>
      env.store.park(env.fence, {
        attemptsDelta: env.control.attemptsDelta('give-back'),
        reason,
        event,
        payload: { key, name, step: index },
        command: { key, index, name, payloadJson, status },
        records: env.log.takePending(),
      }),
    'park',
  );
  throw env.control.halt({ kind: 'parked', reason, until: parked.availableAt, forOperator: true });
}

/** Reserve (fenced), then the call with the key and the fencing token, then the outcome recorded. */
async function dispatch(
  env: StepEnv,
  meta: CommandMetadata,
  cmd: Cmd,
  call: (ctx: CommandContext) => unknown,
): Promise<unknown> {
  const cursor = cursorAt(env, cmd.index, `command:${meta.name}`, 'started');
  const { cancelRequested, reserved } = await env.fenced(
    () => env.store.reserveCommand(env.fence, cursor, cmd, env.log.takePending()),
    'tool.command_reserved',
  );
  if (cancelRequested) env.control.halt({ kind: 'cancelled', error: env.control.cancelled() });
  // Settled meanwhile (an operator decided it): never send it again; the next claim replays the
  // decision from the row.
  else if (!reserved)
    env.control.halt({ kind: 'suspended', reason: `command ${cmd.key} was settled meanwhile` });
  env.control.checkActive(false); // a cancelled run never calls another command (a drain lets it finish)
  crashPoint('after-command-reserve', cmd.index);
  const policy = { ...env.options.defaultRetry, maxAttempts: 1, ...meta.retry };
  let result: unknown;
  try {
    result = await withRetry(policy, env.control.signal, async () => {
      await env.pause('before-call', `command:${meta.name}`);
      await env.lease.ensure(`command ${cmd.key}`);
      const fence = { runId: env.runId, epoch: env.epoch, leaseExpiresAt: env.lease.expiresAt() };
      return call({ idempotencyKey: cmd.key, signal: env.control.signal, fence });
    });
  } catch (err) {
    if (!isNonRetryable(err) || env.control.stop) throw err; // outcome unknown: the row stays pending (in doubt)
    await recordOutcome(env, meta, cmd, {
      status: 'failed',
      error: serializeError(err),
      event: 'tool.command_failed',
      payload: { error: (err as Error).message },
    });
    throw new CommandFailedError(meta.name, cmd.key, (err as Error).message);
  }
  crashPoint('after-command-dispatch', cmd.index);
  const resultJson = commandResultJson(env, meta, result, 'result');
  await recordOutcome(env, meta, cmd, { status: 'succeeded', resultJson, event: 'tool.command_succeeded' });
  return JSON.parse(resultJson);
}
