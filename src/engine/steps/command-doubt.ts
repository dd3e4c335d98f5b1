import type { CommandMetadata, LookupContext, LookupResult } from '../../interfaces/command.interface';
import { isNonRetryable } from '../retry';
import { CommandFailedError } from '../../errors/command-failed.error';
import { Cmd, commandFailure, commandResultJson, recordOutcome } from './command-outcome';
import { commandFence } from './command-fence';
import type { StepEnv } from './step-env';

/** How a provider answers `lookupCommand(command, key, { fence })`. */
export type Lookup = (command: string, key: string, context: LookupContext) => Promise<LookupResult>;

/**
 * Settles a command in doubt by its policy: park for an operator (`manual`), send again with the key
 * (`retry-with-key`: null), or ask the target (`lookup`). `failure` is the error its last call ended
 * with, when it ended with one (null after a crash): a target that never saw the key then makes that
 * error the command's definite outcome, instead of a new send.
 */
export async function resolveInDoubt(
  env: StepEnv,
  meta: CommandMetadata,
  cmd: Cmd,
  lookup: Lookup | undefined,
  failure: Record<string, unknown> | null,
  inDispatch = false,
): Promise<{ result: unknown } | null> {
  if (meta.inDoubt === 'manual') {
    const reason = `command ${cmd.key} is in doubt: resolve it with RunRepository.resolveCommand`;
    return parkCommand(env, cmd, 'in_doubt', reason, inDispatch ? 1 : 0);
  }
  if (meta.inDoubt === 'retry-with-key') return null;
  return env.control.track(lookupAndRecord(env, meta, cmd, lookup!, failure));
}

/**
 * Asks the target by key; records what it found. Not found: the call never acted, so the error it
 * ended with (`failure`) is recorded as its outcome and thrown, or, after a crash (no error), null:
 * send it again.
 */
async function lookupAndRecord(
  env: StepEnv,
  meta: CommandMetadata,
  cmd: Cmd,
  lookup: Lookup,
  failure: Record<string, unknown> | null,
): Promise<{ result: unknown } | null> {
  await env.pause('before-call', `lookup:${meta.name}`);
  await env.lease.ensure(`lookup of ${cmd.key}`);
  // The asking claim's token, as a dispatch passes it: a target that checks tokens raises its fence on
  // the lookup, so a superseded claim's request arriving after it is refused.
  const fence = commandFence(env, cmd.sent);
  const found = await lookup(meta.name, cmd.sent, { fence });
  if (!found.found) {
    if (!failure) return null;
    await recordOutcome(env, meta, cmd, {
      status: 'failed',
      error: failure,
      event: 'tool.command_failed',
      payload: { error: String(failure.message ?? '') },
      resolution: 'lookup',
    });
    throw commandFailure(meta, cmd.key, 'failed', failure);
  }
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
export async function parkCommand(
  env: StepEnv,
  cmd: Cmd,
  status: 'awaiting_approval' | 'in_doubt',
  reason: string,
  own = 0,
  fromApproved = false,
): Promise<never> {
  const event = status === 'in_doubt' ? 'command.in_doubt' : 'command.approval_requested';
  const { key, index, name, payloadJson } = cmd;
  await env.control.quiesce(own);
  const records = env.log.takePending();
  const parked = await env.fenced(
    () =>
      env.store.park(env.fence, {
        attemptsDelta: env.control.attemptsDelta('give-back'),
        reason,
        event,
        payload: { key, name, step: index },
        command: { key, index, name, payloadJson, status, fromApproved },
        records,
      }),
    'park',
    records,
  );
  throw env.control.halt({ kind: 'parked', reason, until: parked.availableAt, forOperator: true });
}

/** The call's error says the target refused it: NonRetryableError, `retryable: false`, or declared so. */
export function isDefinite(meta: CommandMetadata, err: unknown): boolean {
  if (isNonRetryable(err)) return true;
  try {
    return meta.definiteError?.(err) === true;
  } catch {
    return false; // a predicate that throws decides nothing: the outcome stays unknown
  }
}

/**
 * The call ended without a definite answer: the command is recorded in doubt (fenced) before the
 * workflow learns anything, then settled by its policy. `lookup` asks the target now (found: its
 * result; not found: the error, now definite). `retry-with-key` and a lookup that fails themselves
 * retry the run later (backoff), which sends again with the key or asks again. `manual` parks it.
 */
export async function settleUncertain(
  env: StepEnv,
  meta: CommandMetadata,
  cmd: Cmd,
  error: Record<string, unknown>,
  lookup: Lookup | undefined,
): Promise<unknown> {
  await env.fenced(
    () => env.store.commandInDoubt(env.fence, { key: cmd.key, name: meta.name, index: cmd.index, error }),
    'tool.command_in_doubt',
  );
  const reason = `command ${cmd.key} is in doubt`;
  const retryLater = (cause: unknown) => env.control.halt({ kind: 'retry', reason, cause });
  if (meta.inDoubt === 'retry-with-key') throw retryLater(error);
  if (meta.inDoubt === 'manual') return resolveInDoubt(env, meta, cmd, lookup, error, true);
  let settled: { result: unknown } | null;
  try {
    settled = await lookupAndRecord(env, meta, cmd, lookup!, error);
  } catch (e) {
    if (e instanceof CommandFailedError || env.control.stop) throw e;
    throw retryLater(e); // the lookup itself failed: still in doubt, asked again by a later claim
  }
  return settled!.result; // not found with an error recorded throws; found returns
}
