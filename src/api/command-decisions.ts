import { CommandNotFoundError } from '../errors/command-not-found.error';
import { InvalidArgumentError } from '../errors/invalid-argument.error';
import { InvalidCommandStateError } from '../errors/invalid-command-state.error';
import type { ApprovalDecision, CommandResolution } from '../interfaces/command.interface';
import type { ResolvedDurableOptions } from '../options/durable-execution-options.interface';
import type { CommandDecision, CommandStore } from '../store/command.store';
import { eventPayload } from '../store/event-payload';
import { requireText } from '../util/arguments';
import { toStoredJson } from '../util/codec';
import { requireUuid } from '../util/uuid';

/** A decision as the operations below make it (omitted values are null); decide() adds the event payload. */
type Decision = Pick<CommandDecision, 'runId' | 'key' | 'from' | 'to' | 'by' | 'eventType'> &
  Partial<Pick<CommandDecision, 'result' | 'error' | 'resolution' | 'note'>> & { operation: string };

/** Applies one operator decision to a command (one statement) or throws a typed error; nothing changes then. */
async function decide(store: CommandStore, options: ResolvedDurableOptions, d: Decision): Promise<void> {
  const { operation, ...decision } = d;
  const note = d.note ?? null;
  const out = await store.decide({
    ...decision,
    result: d.result ?? null,
    error: d.error ?? null,
    resolution: d.resolution ?? null,
    note,
    eventPayload: eventPayload(options, d.eventType, { key: d.key, by: d.by, note, outcome: d.to }),
  });
  if (!out) throw new CommandNotFoundError(d.key);
  if (!out.updated) throw new InvalidCommandStateError(d.key, out.previousStatus, operation);
}

function checkBy(by: unknown): string {
  if (typeof by !== 'string' || !by.trim())
    throw new InvalidArgumentError('by', 'must name who decided (non-empty string)');
  return requireText(by, 'by');
}

/** Approve (or reject) a command parked for approval; wakes the run. */
export async function approveCommand(
  store: CommandStore,
  options: ResolvedDurableOptions,
  runId: string,
  key: string,
  decision: ApprovalDecision,
  approve: boolean,
): Promise<void> {
  requireUuid(runId, 'runId');
  requireText(key, 'idempotencyKey');
  const by = checkBy(decision?.by);
  const note = requireText(decision.note, 'note', { optional: true, allowEmpty: true });
  return decide(store, options, {
    runId,
    key,
    from: ['awaiting_approval'],
    to: approve ? 'approved' : 'rejected',
    error: approve ? null : JSON.stringify({ message: note ?? 'rejected' }),
    by,
    note,
    eventType: approve ? 'command.approved' : 'command.rejected',
    operation: approve ? 'approve' : 'reject',
  });
}

/** Settle an in-doubt command by hand: its result, a permanent failure, or one more dispatch. */
export async function resolveCommand(
  store: CommandStore,
  options: ResolvedDurableOptions,
  key: string,
  resolution: CommandResolution,
  by: string,
): Promise<void> {
  const outcome = resolution?.outcome;
  if (outcome !== 'succeeded' && outcome !== 'failed' && outcome !== 'retry') {
    throw new InvalidArgumentError('resolution.outcome', "must be 'succeeded', 'failed' or 'retry'");
  }
  requireText(key, 'idempotencyKey');
  const base = {
    runId: null,
    key,
    from: ['in_doubt'],
    by: checkBy(by),
    eventType: 'command.resolved',
    operation: 'resolve',
  };
  if (outcome === 'succeeded') {
    const result = toStoredJson(
      resolution.result ?? null,
      'resolution.result',
      options.limits.maxOutputBytes,
    );
    return decide(store, options, { ...base, to: 'succeeded', result, resolution: 'manual' });
  }
  if (outcome === 'failed') {
    if (typeof resolution.error !== 'string' || !resolution.error) {
      throw new InvalidArgumentError('resolution.error', 'must say why the command failed');
    }
    requireText(resolution.error, 'resolution.error');
    return decide(store, options, {
      ...base,
      to: 'failed',
      error: JSON.stringify({ message: resolution.error }),
      resolution: 'manual',
    });
  }
  return decide(store, options, { ...base, to: 'pending', resolution: 'retry' });
}
