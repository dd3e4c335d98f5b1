import { CommandFailedError } from '../errors/command-failed.error';
import { RunCancelledError } from '../errors/run-cancelled.error';
import type { CommandContext, CommandMetadata, LookupResult } from '../interfaces/command.interface';
import type { RunCursor } from '../interfaces/run.interface';
import { PayloadTooLargeError } from '../errors/payload-too-large.error';
import { SerializationError } from '../errors/serialization.error';
import { storableJson, toStoredJson } from '../util/json';
import type { ActiveRun } from './active-run';
import { argsJson, callFingerprint } from './replay-log';
import { RunSuspended } from './run-suspended';
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
  const payloadJson = toStoredJson(
    args ?? null,
    `arguments of command "${meta.name}"`,
    run.options.limits.maxInputBytes,
  );
  const fingerprint = callFingerprint(stepName, argsJson(JSON.parse(payloadJson)));
  const rec = run.recordedAt(index, stepName, fingerprint);
  if (rec) {
    await run.log.replayed(index);
    return replayOutcome(meta, key, rec.output);
  }
  await run.goLive();

  const cmd = { key, index, name: meta.name, payloadJson, fingerprint };
  const row = run.commands.get(key);
  // A row reserved with other arguments is another call: the workflow is not deterministic. Stop
  // before asking the target about it or sending anything under its key.
  if (row && row.payload !== undefined && !jsonEqual(row.payload, JSON.parse(payloadJson)))
    throw run.nonDeterminismAt(index, stepName, 'was called with other arguments than its reserved command');
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
  return run.track(dispatch(run, meta, cmd, call));
}

/** The command being executed: key, index, name, arguments (JSON) and call fingerprint. */
interface Cmd {
  key: string;
  index: number;
  name: string;
  payloadJson: string;
  fingerprint: string | null;
}

async function resolveInDoubt(
  run: ActiveRun,
  meta: CommandMetadata,
  cmd: Cmd,
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
  return run.track(lookupAndRecord(run, meta, cmd, lookup!));
}

/** Asks the target by key; records what it found (`null`: it never saw the key). */
async function lookupAndRecord(
  run: ActiveRun,
  meta: CommandMetadata,
  cmd: Cmd,
  lookup: Lookup,
): Promise<{ result: unknown } | null> {
  await run.pause('before-call', `lookup:${meta.name}`);
  await run.ensureLease(`lookup of ${cmd.key}`);
  const found = await lookup(meta.name, cmd.key);
  if (!found.found) return null;
  const resultJson = commandResultJson(run, meta, found.result, 'lookup result');
  await recordOutcome(run, meta, cmd, {
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
  run: ActiveRun,
  cmd: Cmd,
  status: 'awaiting_approval' | 'in_doubt',
  reason: string,
): Promise<never> {
  const event = status === 'in_doubt' ? 'command.in_doubt' : 'command.approval_requested';
  const { key, index, name, payloadJson } = cmd;
  await run.quiesce();
  const parked = await run.fenced(
    () =>
      run.writes.park(run.fence, {
        attemptsDelta: run.progressed ? 0 : -1,
        reason,
        event,
        payload: { key, name, step: index },
        command: { key, index, name, payloadJson, status },
        records: run.takePending(),
      }),
    'park',
  );
  run.parkedUntil = parked.availableAt;
  return run.suspend(reason);
}

/**
 * A command's result as stored. The effect already happened, so a result PostgreSQL cannot hold (NUL,
 * lone surrogates) is stored made storable (U+FFFD) rather than lost: losing it would send the
 * command again. First execution and every replay see the stored value.
 */
function commandResultJson(run: ActiveRun, meta: CommandMetadata, result: unknown, what: string): string {
  const subject = `${what} of command "${meta.name}"`;
  const max = run.options.limits.maxOutputBytes;
  try {
    return toStoredJson(result ?? null, subject, max);
  } catch (err) {
    if (!(err instanceof SerializationError) || err instanceof PayloadTooLargeError) throw err;
    return toStoredJson(storableJson(result ?? null) ?? null, subject, max);
  }
}

/** Deep equality of two JSON values, key order ignored (jsonb reorders keys). */
function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  if (ka.length !== kb.length) return false;
  return ka.every((k) => jsonEqual((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
}

async function dispatch(
  run: ActiveRun,
  meta: CommandMetadata,
  cmd: Cmd,
  call: (ctx: CommandContext) => unknown,
): Promise<unknown> {
  const cursor: RunCursor = {
    step: cmd.index,
    name: `command:${meta.name}`,
    status: 'started',
    attempt: run.attempt,
    item: null,
  };
  const { cancelRequested, reserved } = await run.fenced(
    () => run.writes.reserveCommand(run.fence, cursor, cmd, run.takePending()),
    'tool.command_reserved',
  );
  if (cancelRequested) run.stop(new RunCancelledError(run.runId, run.claim.cancelReason));
  // Settled meanwhile (an operator decided it): never send it again; the next claim replays the
  // decision from the row.
  else if (!reserved) run.stop(new RunSuspended(`command ${cmd.key} was settled meanwhile`, true));
  run.checkActive(false); // a cancelled run never calls another command (a drain lets it finish)
  crashPoint('after-command-reserve', cmd.index);
  const policy = { ...run.options.defaultRetry, maxAttempts: 1, ...meta.retry };
  let result: unknown;
  try {
    result = await withRetry(policy, run.signal, async () => {
      await run.pause('before-call', `command:${meta.name}`);
      await run.ensureLease(`command ${cmd.key}`);
      const fence = { runId: run.runId, epoch: run.epoch, leaseExpiresAt: run.leaseExpiresAt() };
      return call({ idempotencyKey: cmd.key, signal: run.signal, fence });
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
  const resultJson = commandResultJson(run, meta, result, 'result');
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

/** Records the outcome (one fenced statement), then hands it to the workflow in delivery order. */
async function recordOutcome(
  run: ActiveRun,
  meta: CommandMetadata,
  cmd: { key: string; index: number; fingerprint: string | null },
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
  const seq = run.log.takeSeq();
  try {
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
          seq,
          fingerprint: cmd.fingerprint,
        }),
      event,
    );
  } catch (err) {
    run.log.abandon(seq);
    throw err;
  }
  run.progressed = true;
  await run.log.deliverLive(seq);
}
