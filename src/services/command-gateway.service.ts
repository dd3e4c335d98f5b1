import { Injectable } from '@nestjs/common';
import { DurableDatabase } from '../persistence/durable-database';

/** A side-effect command as stored in `ai_commands`. */
export interface CommandView {
  idempotencyKey: string;
  runId: string;
  stepIndex: number;
  name: string;
  payload: unknown;
  status: 'pending' | 'succeeded' | 'failed' | 'in_doubt' | 'awaiting_approval' | 'rejected';
  result: unknown;
  error: unknown;
  epoch: number;
  createdAt: Date;
  updatedAt: Date;
}

/**
 * Side-effect commands. This release reads them; reserving and dispatching through
 * `@IdempotentCommand` comes with the side-effects work (see docs/ARCHITECTURE.md).
 */
@Injectable()
export class CommandGateway {
  constructor(private readonly db: DurableDatabase) {}

  /** Commands of one run, in step order. */
  async listForRun(runId: string): Promise<CommandView[]> {
    const { rows } = await this.db.query(
      `select * from ai_commands where run_id = $1 order by step_index, created_at`,
      [runId],
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
