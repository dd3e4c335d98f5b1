import { Injectable } from '@nestjs/common';
import { InvalidArgumentError } from '../errors/invalid-argument.error';
import type { CommandView } from '../interfaces/command.interface';
import { CommandStore } from '../store/command.store';
import { requireUuid } from '../util/uuid';

/** Every status a command can have. */
export const COMMAND_STATUSES: readonly CommandView['status'][] = [
  'pending',
  'succeeded',
  'failed',
  'in_doubt',
  'awaiting_approval',
  'approved',
  'rejected',
];

/**
 * Reads side-effect commands. They are written only by `@IdempotentCommand` inside runs (fenced) and
 * by operator decisions on `RunRepository` (approve, reject, resolveCommand). Its reads are the app's
 * own API: args, results and errors come back as stored, without the module's `redact` hook.
 */
@Injectable()
export class CommandGateway {
  /** @internal Created by Nest dependency injection: not part of the API. */
  constructor(private readonly store: CommandStore) {}

  /**
   * Commands of one run in step order, optionally by status: `{ status: 'in_doubt' }` lists those whose
   * outcome a crash or a cancellation hid. A `runId` that is not a UUID, or an unknown status, is an
   * InvalidArgumentError.
   */
  async listForRun(runId: string, filter: { status?: CommandView['status'] } = {}): Promise<CommandView[]> {
    requireUuid(runId, 'runId');
    if (filter.status !== undefined && !COMMAND_STATUSES.includes(filter.status)) {
      throw new InvalidArgumentError('status', `must be one of ${COMMAND_STATUSES.join(', ')}`);
    }
    return this.store.listForRun(runId, filter.status ?? null);
  }
}
