import type { DurableEventType } from '../interfaces/events.interface';

/**
 * Where run data is shown, as the first argument of the module's `redact` hook. The engine stores
 * these values intact (it replays from them); the admin API, the inspector page and the log lines
 * pass them through `redact` each time they show them.
 *
 * - `run.input`, `run.output`, `run.state`: the run's input, output and state.
 * - `run.error`: the run's error object (`{ name?, code?, message, stack?, cause? }`); the list view and
 *   log lines pass `{ message }` and show the `message` that comes back.
 * - `run.parked_reason`, `run.cancel_reason`: those texts (a dead-lettered run's parked reason quotes
 *   its error message).
 * - `run.idempotency_key`: the key a run was started with (an order reference, an email, ...).
 * - `checkpoint.output`: a step's (or command's, or recorded value's) checkpointed output.
 * - `checkpoint.meta`: what a checkpoint records beside it (a model step's `usage` and `requestId`).
 * - `signal.payload`: a signal's payload, as checkpointed by `ctx.waitForSignal`.
 * - `command.args`, `command.result`, `command.error`: a side-effect command's arguments and outcome.
 * - `stream.data`: the data of a progress stream entry (`ctx.emit`), as the admin API streams it.
 */
export const REDACT_SURFACES = [
  'run.input',
  'run.output',
  'run.state',
  'run.error',
  'run.parked_reason',
  'run.cancel_reason',
  'run.idempotency_key',
  'run.tags',
  'checkpoint.output',
  'checkpoint.meta',
  'signal.payload',
  'command.args',
  'command.result',
  'command.error',
  'stream.data',
] as const;
export type RedactSurface = (typeof REDACT_SURFACES)[number];

/**
 * First argument of the `redact` hook: a surface of run data, or an event type for an event payload
 * (`run.cancel` for the payload of `RunRepository.cancel()`, stored as `run.cancelled` or
 * `run.cancel_requested`).
 */
export type RedactKey = RedactSurface | DurableEventType | 'run.cancel';

/**
 * The module's `redact` hook: returns what may be shown (or stored, for event payloads) in place of
 * `value`. Return `value` itself for keys you do not handle. It must be idempotent: an event payload
 * that was redacted when stored is passed again when shown.
 */
export type RedactHook = (key: RedactKey, value: any) => any;

/** Shown in place of a value when the `redact` hook throws: display fails closed. */
export const REDACTION_FAILED = '[redaction failed]';

/** `value` through `hook` (itself without one); a hook that throws yields REDACTION_FAILED. @internal */
export function redactValue<T>(hook: RedactHook | undefined, key: RedactKey, value: T): T {
  if (!hook) return value;
  try {
    return hook(key, value) as T;
  } catch {
    return REDACTION_FAILED as T;
  }
}

/** An error message through the hook as `run.error` `{ message }`. @internal */
export function redactErrorMessage(hook: RedactHook | undefined, message: string): string;
export function redactErrorMessage(hook: RedactHook | undefined, message: string | null): string | null;
export function redactErrorMessage(hook: RedactHook | undefined, message: string | null): string | null {
  if (!hook || message === null) return message;
  const out = redactValue(hook, 'run.error', { message }) as unknown;
  if (typeof out === 'string') return out;
  const m = (out as { message?: unknown } | null)?.message;
  return typeof m === 'string' ? m : REDACTION_FAILED;
}
