import { IdempotencyConflictError } from '../errors/idempotency-conflict.error';
import { InvalidArgumentError } from '../errors/invalid-argument.error';
import { RunNotFoundError } from '../errors/run-not-found.error';
import type { ForkRunOptions } from '../interfaces/run-fork.interface';
import type { RunView } from '../interfaces/run.interface';
import { eventPayload } from '../store/event-payload';
import { CLEANUP_BASE } from '../store/run-state/cleanup-mark';
import { MAX_IDEMPOTENCY_KEY_BYTES, requireInt4, requireText } from '../util/arguments';
import { toStoredJson } from '../util/codec';
import { requireUuid } from '../util/uuid';
import { type ForkDeps, planCut } from './fork-plan';
import { rewindRun } from './run-rewind';

/** Plans of one fork at most, each when the original's row moved under the one before (a heartbeat, a step). */
const MAX_FORK_TRIES = 50;

const ORIGINAL = ['leave', 'cancel'];

/** `RunRepository.fork` (documented there): checked, planned on a snapshot, written in one statement. */
export async function forkRun(
  d: ForkDeps,
  id: string,
  opts: ForkRunOptions,
): Promise<{ run: RunView; created: boolean; inherited: number }> {
  requireUuid(id, 'runId');
  if (typeof opts !== 'object' || opts === null)
    throw new InvalidArgumentError('options', 'must be an object with fromStep');
  const fromStep = requireInt4(opts.fromStep, 'fromStep', 0);
  if (fromStep >= CLEANUP_BASE)
    throw new InvalidArgumentError(
      'fromStep',
      `must be below ${CLEANUP_BASE} (an onCancel cleanup is never forked)`,
    );
  if (opts.original !== undefined && !ORIGINAL.includes(opts.original))
    throw new InvalidArgumentError(
      'original',
      `must be 'leave' or 'cancel', got ${JSON.stringify(opts.original)}`,
    );
  const version = opts.version === undefined ? undefined : requireInt4(opts.version, 'version', 1);
  const inputJson =
    opts.input === undefined ? null : toStoredJson(opts.input, 'input', d.options.limits.maxInputBytes);
  const edit = editOf(d, opts);
  const key =
    requireText(opts.idempotencyKey, 'idempotencyKey', {
      optional: true,
      maxBytes: MAX_IDEMPOTENCY_KEY_BYTES,
    }) ?? null;
  const by = requireText(opts.by, 'by', { optional: true, allowEmpty: true });
  if (opts.inPlace !== undefined && typeof opts.inPlace !== 'boolean')
    throw new InvalidArgumentError('inPlace', `must be true or false, got ${JSON.stringify(opts.inPlace)}`);
  if (opts.keepKeys !== undefined && typeof opts.keepKeys !== 'boolean')
    throw new InvalidArgumentError('keepKeys', `must be true or false, got ${JSON.stringify(opts.keepKeys)}`);
  if (opts.inPlace) {
    for (const field of ['original', 'idempotencyKey', 'keepKeys'] as const)
      if (opts[field] !== undefined)
        throw new InvalidArgumentError(field, 'does not apply to a rewind in place (inPlace: true)');
    return rewindRun(d, id, { fromStep, version, inputJson, edit, by });
  }

  for (let attempt = 1; ; attempt++) {
    const read = await d.control.forks.plan(id);
    if (!read) throw new RunNotFoundError(id);
    const cut = planCut(read, fromStep, opts.original, edit);
    const pinned = version ?? read.version;
    const wf = d.registry.getWorkflow(read.kind);
    if (wf && version !== undefined && !d.registry.getWorkflow(read.kind, version))
      throw new InvalidArgumentError(
        'version',
        `names no version of '${read.kind}' registered here (${d.registry.versions(read.kind).join(', ')})`,
      );
    const original = opts.original ?? 'leave';
    const common = { fromStep, original, ...(by ? { by } : {}) };
    const outcome = await d.control.forks.fork({
      originalId: id,
      rowVersion: read.rowVersion,
      fromStep,
      original,
      inputJson,
      version: pinned,
      edit: cut.edit,
      idempotencyKey: key,
      createdEvent: eventPayload(d.options, 'run.created', {
        kind: read.kind,
        idempotencyKey: key,
        forkedFrom: id,
        fromStep,
        ...(cut.edit ? { edited: cut.edit.index } : {}),
      }),
      forkedEvent: eventPayload(d.options, 'run.forked', common),
      cancelReason: `replaced by a fork from step ${fromStep}`,
      cancelledEvent: eventPayload(d.options, 'run.cancelled', {
        reason: `replaced by a fork from step ${fromStep}`,
        ...(by ? { by } : {}),
      }),
      childEnds: cut.childEnds,
      keepKeys: opts.keepKeys === true,
    });
    switch (outcome.kind) {
      case 'forked':
        return { run: outcome.run, created: true, inherited: outcome.inherited };
      case 'not-found':
        throw new RunNotFoundError(id);
      case 'key-taken':
        return existingFork(d, key!, id, fromStep, read.kind, inputJson);
      case 'moved':
        if (attempt >= MAX_FORK_TRIES)
          throw new Error(`fork of run ${id}: its record changed under ${attempt} tries; try again`);
        if (attempt >= 3) await new Promise((r) => setTimeout(r, Math.random() * Math.min(50, attempt * 5)));
    }
  }
}

/** The edit's value as stored (the codec's JSON), checked before anything is read. */
function editOf(d: ForkDeps, opts: ForkRunOptions): { step: number; valueJson: string } | undefined {
  const e = opts.editResult;
  if (e === undefined) return undefined;
  if (typeof e !== 'object' || e === null || !('value' in e))
    throw new InvalidArgumentError('editResult', 'must be { step, value }');
  const step = requireInt4(e.step, 'editResult.step', 0);
  const valueJson = toStoredJson(e.value, 'editResult.value', d.options.limits.maxOutputBytes);
  return { step, valueJson };
}

/** A fork's idempotency key taken: the fork it names when it is this one's repeat, else a conflict. */
async function existingFork(
  d: ForkDeps,
  key: string,
  id: string,
  fromStep: number,
  kind: string,
  inputJson: string | null,
): Promise<{ run: RunView; created: boolean; inherited: number }> {
  const holder = await d.control.holderOf(key, inputJson ?? 'null');
  if (!holder) throw new Error(`idempotency key "${key}" conflicted but no run holds it; try again`);
  const f = holder.run.forkedFrom;
  if (f?.runId === id && f.fromStep === fromStep && (inputJson === null || holder.sameInput))
    return { run: holder.run, created: false, inherited: 0 };
  throw new IdempotencyConflictError(key, holder.run.id, holder.run.kind, kind);
}
