import { Injectable } from '@nestjs/common';
import { InvalidArgumentError } from '../errors/invalid-argument.error';
import { DurableDatabase } from '../store/durable-database';
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

/** A side-effect command as stored in `ai_commands`. */
export interface CommandView {
  idempotencyKey: string;
  runId: string;
  stepIndex: number;
  name: string;
  payload: unknown;
  status: 'pending' | 'succeeded' | 'failed' | 'in_doubt' | 'awaiting_approval' | 'approved' | 'rejected';
  result: unknown;
  error: unknown;
  epoch: number;
  createdAt: Date;
  updatedAt: Date;
}

/**
 * Reads side-effect commands. They are written only by `@IdempotentCommand` inside runs (fenced) and
 * by operator decisions on `RunRepository` (approve, reject, resolveCommand). Its reads are the app's
 * own API: args, results and errors come back as stored, without the module's `redact` hook.
 */
@Injectable()
export class CommandGateway {
  constructor(private readonly db: DurableDatabase) {}

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
    const { rows } = await this.db.query(
      `select * from ai_commands where run_id = $1 and ($2::text is null or status = $2) order by step_index, created_at`,
      [runId, filter.status ?? null],
    );
    return rows.map((r) => ({
      idempotencyKey: r.idempotency_key,
      runId: r.run_id,
      stepIndex: r.step_index,
      name: r.command_name,
      payload: r.payload,
      status: r.status,
      result: r.result,
      error: r.error,
      epoch: Number(r.epoch),
      createdAt: r.created_at,
      updatedAt: r.updated_at,
    }));
  }
}
