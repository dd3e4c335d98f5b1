import { WAKE_CHANNEL } from '../durable-execution.constants';
import { CommandNotFoundError } from '../errors/command-not-found.error';
import { InvalidArgumentError } from '../errors/invalid-argument.error';
import { InvalidCommandStateError } from '../errors/invalid-command-state.error';
import type { ApprovalDecision, CommandResolution } from '../interfaces/command.interface';
import type { ResolvedDurableOptions } from '../options/durable-execution-options.interface';
import type { DurableDatabase } from '../store/durable-database';
import { eventPayload } from '../store/event-payload';
import { DECIDE_COMMAND_SQL } from '../store/sql/operator.sql';
import { requireText } from '../util/arguments';
import { toStoredJson } from '../util/json';
import { requireUuid } from '../util/uuid';

interface Decision {
  runId: string | null;
  key: string;
  from: string[];
  to: string;
  result?: string | null;
  error?: string | null;
  resolution?: string | null;
  by: string;
  note?: string | null;
  event: string;
  operation: string;
}

/** Applies one operator decision to a command (one statement) or throws a typed error; nothing changes then. */
async function decide(db: DurableDatabase, options: ResolvedDurableOptions, d: Decision): Promise<void> {
  const { rows } = await db.query(DECIDE_COMMAND_SQL, [
    d.runId,
    d.key,
    d.from,
    d.to,
    d.result ?? null,
    d.error ?? null,
    d.resolution ?? null,
    d.by,
    d.note ?? null,
    d.event,
    eventPayload(options, d.event, { key: d.key, by: d.by, note: d.note ?? null, outcome: d.to }),
    WAKE_CHANNEL,
  ]);
  if (!rows.length) throw new CommandNotFoundError(d.key);
  if (!rows[0].updated) throw new InvalidCommandStateError(d.key, rows[0].previous_status, d.operation);
}

function checkBy(by: unknown): string {
  if (typeof by !== 'string' || !by.trim())
    throw new InvalidArgumentError('by', 'must name who decided (non-empty string)');
  return requireText(by, 'by');
}

/** Approve (or reject) a command parked for approval; wakes the run. */
export async function approveCommand(
  db: DurableDatabase,
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
  return decide(db, options, {
    runId,
    key,
    from: ['awaiting_approval'],
    to: approve ? 'approved' : 'rejected',
    error: approve ? null : JSON.stringify({ message: note ?? 'rejected' }),
    by,
    note,
    event: approve ? 'command.approved' : 'command.rejected',
    operation: approve ? 'approve' : 'reject',
  });
}

/** Settle an in-doubt command by hand: its result, a permanent failure, or one more dispatch. */
export async function resolveCommand(
  db: DurableDatabase,
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
    event: 'command.resolved',
    operation: 'resolve',
  };
  if (outcome === 'succeeded') {
    const result = toStoredJson(
      resolution.result ?? null,
      'resolution.result',
      options.limits.maxOutputBytes,
    );
    return decide(db, options, { ...base, to: 'succeeded', result, resolution: 'manual' });
  }
  if (outcome === 'failed') {
    if (typeof resolution.error !== 'string' || !resolution.error) {
      throw new InvalidArgumentError('resolution.error', 'must say why the command failed');
    }
    requireText(resolution.error, 'resolution.error');
    return decide(db, options, {
      ...base,
      to: 'failed',
      error: JSON.stringify({ message: resolution.error }),
      resolution: 'manual',
    });
  }
  return decide(db, options, { ...base, to: 'pending', resolution: 'retry' });
}
