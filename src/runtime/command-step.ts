import { CommandFailedError } from '../errors/command-failed.error';
import { RunCancelledError } from '../errors/run-cancelled.error';
import type { CommandContext, CommandMetadata, LookupResult } from '../interfaces/command.interface';
import type { RunCursor } from '../interfaces/run.interface';
import { toStoredJson } from '../util/json';
import type { ActiveRun } from './active-run';
import { crashPoint } from './crash-points';
import { serializeError } from './serialize-error';
import { isNonRetryable, withRetry } from './retry';

type Lookup = (command: string, key: string) => Promise<LookupResult>;

/** `run_<id>:step_<n>[:tool_call_<id>]:<name>`: the same on every replay of this run. */
export function commandKey(
  runId: string,
  index: number,
  toolCallId: string | undefined,
  name: string,
): string {
  return `run_${runId}:step_${index}${toolCallId ? `:tool_call_${toolCallId}` : ''}:${name}`;
}

function toolCallOf(meta: CommandMetadata, args: unknown): string | undefined {
  if (meta.toolCallId) return meta.toolCallId(args);
  const a = args as { toolCallId?: unknown; tool_call_id?: unknown } | null;
  const id = a && typeof a === 'object' ? (a.toolCallId ?? a.tool_call_id) : undefined;
  return typeof id === 'string' ? id : undefined;
}

/** Replays a recorded outcome: the stored result, or the stored failure rethrown. */
function replayOutcome(meta: CommandMetadata, key: string, output: unknown): unknown {
  const o = output as { status: string; result?: unknown; error?: { message?: string } };
  if (o.status === 'succeeded') return o.result;
  throw new CommandFailedError(meta.name, key, o.error?.message ?? 'unknown', o.status === 'rejected');
}

/**
 * One `@IdempotentCommand` call inside a run: replay a recorded outcome, settle a command whose outcome
 * a crash hid (by policy), park for approval, or reserve → dispatch with the key → record.
 */
export async function executeCommand(
  run: ActiveRun,
  meta: CommandMetadata,
  args: unknown,
  call: (ctx: CommandContext) => unknown,
  lookup?: Lookup,
): Promise<unknown> {
  run.checkActive();
  const index = run.allocIndex();
  const stepName = `command:${meta.name}`;
  const key = commandKey(run.runId, index, toolCallOf(meta, args), meta.name);
  const rec = run.recordedAt(index, stepName);
  if (rec) return replayOutcome(meta, key, rec.output);

  const payloadJson = toStoredJson(
    args ?? null,
    `arguments of command "${meta.name}"`,
    run.options.limits.maxInputBytes,
  );
  const cmd = { key, index, name: meta.name, payloadJson };
  const row = run.commands.get(key);
  const record = (o: Outcome) => recordOutcome(run, meta, cmd, o);

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
        return parkCommand(run, cmd, 'awaiting_approval', `awaiting approval of ${key}`);
      case 'in_doubt':
      case 'pending':
        if (!(row.status === 'pending' && row.resolution === 'retry')) {
          const settled = await resolveInDoubt(run, meta, cmd, lookup);
          if (settled) return settled.result;
        }
        break;
      // 'approved' falls through to dispatch
    }
  } else if (
    typeof meta.requiresApproval === 'function' ? meta.requiresApproval(args) : meta.requiresApproval
  ) {
    return parkCommand(run, cmd, 'awaiting_approval', `awaiting approval of ${key}`);
  }
  return dispatch(run, meta, cmd, call);
}

async function resolveInDoubt(
  run: ActiveRun,
  meta: CommandMetadata,
  cmd: { key: string; index: number; name: string; payloadJson: string },
  lookup?: Lookup,
): Promise<{ result: unknown } | null> {
  if (meta.inDoubt === 'manual') {
    return parkCommand(
      run,
      cmd,
      'in_doubt',
      `command ${cmd.key} is in doubt: resolve it with RunRepository.resolveCommand`,
    );
  }
  if (meta.inDoubt === 'retry-with-key') return null;
  await run.pause('before-call', `lookup:${meta.name}`);
  const found = await lookup!(meta.name, cmd.key);
  if (!found.found) return null;
  const resultJson = toStoredJson(
    found.result ?? null,
    `lookup result of command "${meta.name}"`,
    run.options.limits.maxOutputBytes,
  );
  await recordOutcome(run, meta, cmd, {
    status: 'succeeded',
    resultJson,
    event: 'command.resolved',
    payload: { by: 'lookup', found: true },
    resolution: 'lookup',
  });
  return { result: JSON.parse(resultJson) };
}

async function parkCommand(
  run: ActiveRun,
  cmd: { key: string; index: number; name: string; payloadJson: string },
  status: 'awaiting_approval' | 'in_doubt',
  reason: string,
): Promise<never> {
  const event = status === 'in_doubt' ? 'command.in_doubt' : 'command.approval_requested';
  await run.fenced(async () => {
    await run.writes.park(run.fence, {
      attemptsDelta: run.progressed ? 0 : -1,
      reason,
      event,
      payload: { key: cmd.key, name: cmd.name, step: cmd.index },
      command: { ...cmd, status },
      records: run.takePending(),
    });
    return {};
  }, 'park');
  return run.suspend(reason);
}

async function dispatch(
  run: ActiveRun,
  meta: CommandMetadata,
  cmd: { key: string; index: number; name: string; payloadJson: string },
  call: (ctx: CommandContext) => unknown,
): Promise<unknown> {
  const cursor: RunCursor = {
    step: cmd.index,
    name: `command:${meta.name}`,
    status: 'started',
    attempt: run.attempt,
    item: null,
  };
  const { cancelRequested } = await run.fenced(
    () => run.writes.reserveCommand(run.fence, cursor, cmd, run.takePending()),
    'tool.command_reserved',
  );
  if (cancelRequested) run.stop(new RunCancelledError(run.runId, run.claim.cancelReason));
  run.checkActive(false); // a cancelled run never calls another command (a drain lets it finish)
  crashPoint('after-command-reserve', cmd.index);
  const policy = { ...run.options.defaultRetry, maxAttempts: 1, ...meta.retry };
  let result: unknown;
  try {
    result = await withRetry(policy, run.signal, async () => {
      await run.pause('before-call', `command:${meta.name}`);
      return call({ idempotencyKey: cmd.key, signal: run.signal });
    });
  } catch (err) {
    if (!isNonRetryable(err) || run.stopReason) throw err; // outcome unknown: the row stays pending (in doubt)
    await recordOutcome(run, meta, cmd, {
      status: 'failed',
      error: serializeError(err),
      event: 'tool.command_failed',
      payload: { error: (err as Error).message },
    });
    throw new CommandFailedError(meta.name, cmd.key, (err as Error).message);
  }
  crashPoint('after-command-dispatch', cmd.index);
  const resultJson = toStoredJson(
    result ?? null,
    `result of command "${meta.name}"`,
    run.options.limits.maxOutputBytes,
  );
  await recordOutcome(run, meta, cmd, { status: 'succeeded', resultJson, event: 'tool.command_succeeded' });
  return JSON.parse(resultJson);
}

/** A command outcome to record: status, result or error, the event, and how it was settled. */
interface Outcome {
  status: 'succeeded' | 'failed' | 'rejected';
  resultJson?: string | null;
  error?: Record<string, unknown> | null;
  event: string;
  payload?: Record<string, unknown>;
  resolution?: string | null;
}

async function recordOutcome(
  run: ActiveRun,
  meta: CommandMetadata,
  cmd: { key: string; index: number },
  { status, resultJson = null, error = null, event, payload = {}, resolution = null }: Outcome,
): Promise<void> {
  const stepName = `command:${meta.name}`;
  const cursor: RunCursor = {
    step: cmd.index,
    name: stepName,
    status: 'done',
    attempt: run.attempt,
    item: null,
  };
  await run.fenced(
    () =>
      run.writes.recordCommand(run.fence, cursor, {
        key: cmd.key,
        status,
        resultJson,
        error,
        index: cmd.index,
        name: stepName,
        event,
        payload: { key: cmd.key, name: meta.name, step: cmd.index, ...payload },
        resolution,
      }),
    event,
  );
  const output =
    status === 'succeeded' ? { status, result: JSON.parse(resultJson ?? 'null') } : { status, error };
  run.remember(cmd.index, stepName, output);
}
