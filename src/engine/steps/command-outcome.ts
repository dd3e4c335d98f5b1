import { CommandFailedError } from '../../errors/command-failed.error';
import { generationPart } from '../../store/run-state/fence';
import { PayloadTooLargeError } from '../../errors/payload-too-large.error';
import { SerializationError } from '../../errors/serialization.error';
import type { CommandMetadata } from '../../interfaces/command.interface';
import { storableJson } from '../../util/json';
import { toStoredJson } from '../../util/codec';
import { cursorAt, StepEnv } from './step-env';

/** The command being executed: key, index, name, arguments (JSON) and call fingerprint. */
export interface Cmd {
  key: string;
  /**
   * The key the target gets (the call's `idempotencyKey`, a lookup's, the fencing token's): `key`, or for
   * a fork that keeps its original's keys the same key under the original's prefix (`keysFrom`).
   */
  sent: string;
  index: number;
  name: string;
  payloadJson: string;
  fingerprint: string | null;
}

/**
 * `run_<id>[:g<generation>]:step_<n>[:tool_call_<id>]:<name>`: the same on every replay of this run
 * (the generation only after a `ctx.continueAsNew` or a rewind). `prefix`: another run part, the key sent by a
 * fork that keeps its original's keys (`run_<original>[:g<n>]`).
 */
export function commandKey(
  runId: string,
  index: number,
  toolCallId: string | undefined,
  name: string,
  generation = 0,
  own?: string,
  prefix = `run_${runId}${generationPart(generation)}`,
): string {
  if (own !== undefined) return `${prefix}:key_${own}:${name}`;
  return `${prefix}:step_${index}${toolCallId ? `:tool_call_${toolCallId}` : ''}:${name}`;
}

const OWN_KEY = /^[A-Za-z0-9_.-]{1,200}$/;

/** The command's own key (`key` option) for these arguments (undefined: by position), or what is wrong. */
export function ownKeyOf(meta: CommandMetadata, args: unknown): { own?: string; problem?: string } {
  const own = meta.key?.(args);
  if (own === undefined || (typeof own === 'string' && OWN_KEY.test(own))) return { own };
  return {
    problem: `command "${meta.name}": key must return 1-200 letters, digits, '_', '-' or '.', or undefined; got ${JSON.stringify(own)}`,
  };
}

/** The model's tool-call id carried by the arguments (or picked by `toolCallId`), if any. */
export function toolCallOf(meta: CommandMetadata, args: unknown): string | undefined {
  if (meta.toolCallId) return meta.toolCallId(args);
  const a = args as { toolCallId?: unknown; tool_call_id?: unknown } | null;
  const id = a && typeof a === 'object' ? (a.toolCallId ?? a.tool_call_id) : undefined;
  return typeof id === 'string' ? id : undefined;
}

/** Replays a recorded outcome: the stored result, or the stored failure rethrown. */
export function replayOutcome(meta: CommandMetadata, key: string, output: unknown): unknown {
  const o = output as { status: string; result?: unknown; error?: { message?: string } | null };
  if (o.status === 'succeeded') return o.result;
  throw commandFailure(meta, key, o.status, o.error);
}

/**
 * The error a workflow gets for a failed or rejected command, built from the stored error only, so
 * the first execution throws what every replay throws.
 */
export function commandFailure(
  meta: CommandMetadata,
  key: string,
  status: string,
  error: { message?: unknown } | null | undefined,
): CommandFailedError {
  const reason = typeof error?.message === 'string' ? error.message : status;
  return new CommandFailedError(meta.name, key, reason, status === 'rejected');
}

/**
 * A command's result as stored. The effect already happened, so a result PostgreSQL cannot hold (NUL,
 * lone surrogates) is stored made storable (U+FFFD) rather than lost: losing it would send the
 * command again. First execution and every replay see the stored value.
 */
export function commandResultJson(
  env: StepEnv,
  meta: CommandMetadata,
  result: unknown,
  what: string,
): string {
  const subject = `${what} of command "${meta.name}"`;
  const max = env.options.limits.maxOutputBytes;
  try {
    return toStoredJson(result ?? null, subject, max);
  } catch (err) {
    if (!(err instanceof SerializationError) || err instanceof PayloadTooLargeError) throw err;
    return toStoredJson(storableJson(result ?? null) ?? null, subject, max);
  }
}

/** A command outcome to record: status, result or error, the event, and how it was settled. */
export interface Outcome {
  status: 'succeeded' | 'failed' | 'rejected';
  resultJson?: string | null;
  error?: Record<string, unknown> | null;
  event: string;
  payload?: Record<string, unknown>;
  resolution?: string | null;
}

/** Records the outcome (one fenced statement), then hands it to the workflow in delivery order. */
export async function recordOutcome(
  env: StepEnv,
  meta: CommandMetadata,
  cmd: Pick<Cmd, 'key' | 'index' | 'fingerprint'>,
  { status, resultJson = null, error = null, event, payload = {}, resolution = null }: Outcome,
): Promise<void> {
  const stepName = `command:${meta.name}`;
  const cursor = cursorAt(env, cmd.index, stepName, 'done');
  const seq = env.log.takeSeq();
  try {
    await env.fenced(
      () =>
        env.store.recordCommand(env.fence, cursor, {
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
    env.log.abandon(seq);
    throw err;
  }
  env.control.progressed = true;
  await env.log.deliverLive(seq);
}
