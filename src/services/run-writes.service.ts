import { Inject, Injectable } from '@nestjs/common';
import { DURABLE_EXECUTION_OPTIONS } from '../durable-execution.constants';
import { LeaseLostError } from '../errors/lease-lost.error';
import type { RunCursor } from '../interfaces/run.interface';
import type { ResolvedDurableOptions } from '../options/durable-execution-options.interface';
import { DurableDatabase } from '../persistence/durable-database';
import { eventPayload } from '../persistence/event-payload';
import { PARK_RUN_SQL, RECORD_COMMAND_SQL, RESERVE_COMMAND_SQL } from '../persistence/sql/command.sql';
import { CONSUME_SIGNAL_SQL } from '../persistence/sql/signal.sql';
import { CheckpointWrite, Fence, recordset } from './lease.service';

/** A park: where the run waits, and what is recorded with it. */
export interface ParkWrite {
  at?: string | null;
  delayMs?: number | null;
  attemptsDelta: number;
  reason: string;
  event: string;
  payload: Record<string, unknown>;
  command?: {
    key: string;
    status: 'awaiting_approval' | 'in_doubt';
    index: number;
    name: string;
    payloadJson: string;
  };
  /** Record the due time (database clock) as checkpoint `name` at `index`. */
  dueRecord?: { index: number; name: string };
  records?: CheckpointWrite[];
}

/**
 * Fenced writes of commands, parks and signals: each one SQL statement, each throwing LeaseLostError
 * when the (run, worker, epoch) fence no longer matches. @internal
 */
@Injectable()
export class RunWrites {
  constructor(
    private readonly db: DurableDatabase,
    @Inject(DURABLE_EXECUTION_OPTIONS) private readonly options: ResolvedDurableOptions,
  ) {}

  private fenceArgs(f: Fence): unknown[] {
    return [f.runId, f.workerId, f.epoch];
  }

  async reserveCommand(
    f: Fence,
    cursor: RunCursor,
    cmd: { key: string; index: number; name: string; payloadJson: string },
    records: CheckpointWrite[],
  ): Promise<{ cancelRequested: boolean; reserved: boolean }> {
    const payload = { key: cmd.key, name: cmd.name, step: cmd.index };
    const { rows } = await this.db.query(
      RESERVE_COMMAND_SQL,
      [
        ...this.fenceArgs(f),
        JSON.stringify(cursor),
        this.options.worker.leaseTtlMs,
        cmd.key,
        cmd.index,
        cmd.name,
        cmd.payloadJson,
        eventPayload(this.options, 'tool.command_reserved', payload),
        recordset(records),
      ],
      'dx_reserve_command',
    );
    if (!rows.length) throw new LeaseLostError(f.runId, f.epoch, `reserve of command ${cmd.key}`);
    return { cancelRequested: rows[0].cancel_requested, reserved: rows[0].reserved === 1 };
  }

  async recordCommand(
    f: Fence,
    cursor: RunCursor,
    w: {
      key: string;
      status: 'succeeded' | 'failed' | 'rejected';
      resultJson: string | null;
      error: Record<string, unknown> | null;
      index: number;
      name: string;
      event: string;
      payload: Record<string, unknown>;
      resolution?: string | null;
    },
  ): Promise<{ cancelRequested: boolean }> {
    const output =
      w.status === 'succeeded'
        ? `{"status":"succeeded","result":${w.resultJson ?? 'null'}}`
        : JSON.stringify({ status: w.status, error: w.error });
    const { rows } = await this.db.query(
      RECORD_COMMAND_SQL,
      [
        ...this.fenceArgs(f),
        JSON.stringify(cursor),
        this.options.worker.leaseTtlMs,
        w.key,
        w.status,
        w.resultJson,
        w.error ? JSON.stringify(w.error) : null,
        output,
        w.index,
        w.name,
        w.event,
        eventPayload(this.options, w.event, w.payload),
        w.resolution ?? null,
      ],
      'dx_record_command',
    );
    if (!rows.length) throw new LeaseLostError(f.runId, f.epoch, `record of command ${w.key}`);
    return { cancelRequested: rows[0].cancel_requested };
  }

  /** Parks the run (lease released); returns the time it becomes due (null = until woken). */
  async park(f: Fence, w: ParkWrite): Promise<Date | null> {
    const { rows } = await this.db.query(
      PARK_RUN_SQL,
      [
        ...this.fenceArgs(f),
        w.at ?? null,
        w.delayMs ?? null,
        w.attemptsDelta,
        w.reason,
        w.event,
        eventPayload(this.options, w.event, w.payload),
        w.command?.key ?? null,
        w.command?.status ?? null,
        w.command?.index ?? null,
        w.command?.name ?? null,
        w.command?.payloadJson ?? null,
        w.dueRecord?.index ?? null,
        w.dueRecord?.name ?? null,
        recordset(w.records ?? []),
      ],
      'dx_park',
    );
    if (!rows.length) throw new LeaseLostError(f.runId, f.epoch, w.event);
    const at = rows[0].available_at as Date;
    return Number.isFinite(at?.getTime?.()) ? at : null;
  }

  /** Consumes the oldest pending signal `name` into checkpoint `index`; `consumed: false` when none. */
  async consumeSignal(
    f: Fence,
    name: string,
    index: number,
    records: CheckpointWrite[],
  ): Promise<{ consumed: boolean; payload: unknown }> {
    const { rows } = await this.db.query(
      CONSUME_SIGNAL_SQL,
      [
        ...this.fenceArgs(f),
        this.options.worker.leaseTtlMs,
        name,
        index,
        `$signal:${name}`,
        recordset(records),
      ],
      'dx_consume_signal',
    );
    if (!rows[0]?.owned) throw new LeaseLostError(f.runId, f.epoch, `wait for signal ${name}`);
    return { consumed: rows[0].consumed === 1, payload: rows[0].payload };
  }
}
