import type { DurableRegistry } from '../engine/durable.registry';
import { InvalidRunStateError } from '../errors/invalid-run-state.error';
import { RunNotFoundError } from '../errors/run-not-found.error';
import type { RetryHeldOptions, RunView } from '../interfaces/run.interface';
import type { ResolvedDurableOptions } from '../options/durable-execution-options.interface';
import { eventPayload } from '../store/event-payload';
import type { RunControlStore } from '../store/run-control.store';
import type { RunReadStore } from '../store/run-reads.store';
import { requireInt4, requireSignalName, requireText } from '../util/arguments';
import { toStoredJson } from '../util/codec';
import { InvalidArgumentError } from '../errors/invalid-argument.error';
import { TooManyPendingSignalsError } from '../errors/too-many-pending-signals.error';
import { requireUuid } from '../util/uuid';

export { forkRun } from './run-fork';

/** What the operator actions of `RunRepository` need. @internal */
export interface RunActionDeps {
  control: RunControlStore;
  reads: RunReadStore;
  options: ResolvedDurableOptions;
  registry: DurableRegistry;
}

/** `RunRepository.cancel`: checked, recorded with who asked; the run as it is after. */
export async function cancelRun(
  d: RunActionDeps,
  id: string,
  reason?: string,
  by?: string,
): Promise<RunView> {
  requireUuid(id, 'id');
  requireText(reason, 'reason', { optional: true, allowEmpty: true });
  requireText(by, 'by', { optional: true, allowEmpty: true });
  const out = await d.control.cancel(
    id,
    reason ?? null,
    eventPayload(d.options, 'run.cancel', { reason: reason ?? null, ...(by ? { by } : {}) }),
  );
  if (!out) throw new RunNotFoundError(id);
  if (!out.status) throw new InvalidRunStateError(id, out.previousStatus, 'cancel');
  return (await d.reads.get(id))!;
}

/** `RunRepository.retry`: a dead-lettered, failed or held run re-driven; the run as it is after. */
export async function retryRun(d: RunActionDeps, id: string, by?: string): Promise<RunView> {
  requireUuid(id, 'id');
  requireText(by, 'by', { optional: true, allowEmpty: true });
  const out = await d.control.retry(id, eventPayload(d.options, 'run.retried', { by: by ?? null }));
  if (!out) throw new RunNotFoundError(id);
  if (!['dead_lettered', 'failed', 'held'].includes(out.previousStatus)) {
    throw new InvalidRunStateError(id, out.previousStatus, 'retry');
  }
  return (await d.reads.get(id))!;
}

/** `RunRepository.retryHeld`: up to `limit` held runs of `kind` re-driven in one statement. */
export async function retryHeldRuns(
  d: RunActionDeps,
  kind: string,
  opts: RetryHeldOptions,
): Promise<{ retried: number }> {
  requireText(kind, 'kind');
  requireText(opts.by, 'by', { optional: true, allowEmpty: true });
  const limit = requireInt4(opts.limit ?? 1000, 'limit', 1);
  const version = opts.version === undefined ? null : requireInt4(opts.version, 'version', 1);
  const event = eventPayload(d.options, 'run.retried', { by: opts.by ?? null });
  return { retried: await d.control.retryHeld(kind, limit, event, version) };
}

/** Sends of one signal at most, when each finds the run's row changed by a concurrent write (`moved`). */
const MAX_SIGNAL_TRIES = 100;

/**
 * `RunRepository.signal`: checked, stored and the run woken; a run of another kind than `kind` (when
 * given), an unknown or a finished run is refused with nothing stored, and so is a run whose mailbox is
 * full (`limits.maxPendingSignals`, `maxPendingSignalsPerName`: TooManyPendingSignalsError). The payload
 * is checked against `limits.maxInputBytes` while it is walked (the walk stops at the cap).
 */
export async function sendSignal(
  d: RunActionDeps,
  kind: string | null,
  id: string,
  name: string,
  payload: unknown = null,
  by?: string,
): Promise<void> {
  requireUuid(id, 'id');
  requireSignalName(name, 'name');
  requireText(by, 'by', { optional: true, allowEmpty: true });
  const json = toStoredJson(payload, `payload of signal "${name}"`, d.options.limits.maxInputBytes);
  const { maxPendingSignals: perRun, maxPendingSignalsPerName: perName } = d.options.limits;
  for (let attempt = 1; ; attempt++) {
    const out = await d.control.signal({
      id,
      name,
      payloadJson: json,
      by: by ?? null,
      kind,
      perRun,
      perName,
    });
    if (!out) throw new RunNotFoundError(id);
    if (out.kind !== (kind ?? out.kind))
      throw new InvalidArgumentError('id', `names a run of kind '${out.kind}', not '${kind}'`);
    if (!['pending', 'running', 'waiting'].includes(out.status))
      throw new InvalidRunStateError(id, out.status, `signal "${name}" to`);
    if (out.stored) return;
    // The run's row changed between the statement's snapshot and its lock: count again (after a few
    // tries, a short random pause lets the other senders of this run through first).
    if (out.moved && attempt < MAX_SIGNAL_TRIES) {
      if (attempt >= 3) await new Promise((r) => setTimeout(r, Math.random() * Math.min(50, attempt * 2)));
      continue;
    }
    if (out.moved) throw new Error(`signal "${name}" to run ${id}: the run changed under ${attempt} tries`);
    if (out.pending >= perRun) throw new TooManyPendingSignalsError(id, name, 'run', perRun);
    throw new TooManyPendingSignalsError(id, name, 'name', perName);
  }
}
