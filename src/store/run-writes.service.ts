import { Inject, Injectable } from '@nestjs/common';
import { DURABLE_EXECUTION_OPTIONS } from '../durable-execution.constants';
import { LeaseLostError } from '../errors/lease-lost.error';
import type { RunCursor } from '../interfaces/run.interface';
import type { ResolvedDurableOptions } from '../options/durable-execution-options.interface';
import { DurableDatabase } from './durable-database';
import { eventPayload } from './event-payload';
import { PARK_RUN_SQL, RECORD_COMMAND_SQL, RESERVE_COMMAND_SQL } from './sql/command.sql';
import { WAIT_FOR_SIGNAL_SQL } from './sql/signal.sql';
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
  /** Record the due time (database clock) as checkpoint `name` at `index`, delivered as `seq`. */
  dueRecord?: { index: number; name: string; seq: number };
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
      seq: number;
      fingerprint: string | null;
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
        w.seq,
        w.fingerprint,
      ],
      'dx_record_command',
    );
    if (!rows.length) throw new LeaseLostError(f.runId, f.epoch, `record of command ${w.key}`);
    return { cancelRequested: rows[0].cancel_requested };
  }

  /**
   * Parks the run (lease released). `availableAt` is when it becomes due: null = until woken; `now`
   * or earlier when something it waits for is already stored (nothing stranded); `due` is the due
   * time the park asked for.
   */
  async park(f: Fence, w: ParkWrite): Promise<{ availableAt: Date | null; due: Date | null }> {
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
        w.dueRecord?.seq ?? null,
      ],
      'dx_park',
    );
    if (!rows.length) throw new LeaseLostError(f.runId, f.epoch, w.event);
    return { availableAt: finiteDate(rows[0].available_at), due: finiteDate(rows[0].due) };
  }

  /**
   * One statement: consume the oldest pending signal `name`, or record the timeout when the deadline
   * passed, or park (due at once when something arrived meanwhile). See WAIT_FOR_SIGNAL_SQL.
   */
  async waitForSignal(f: Fence, w: SignalWaitWrite): Promise<SignalWaitOutcome> {
    const { rows } = await this.db.query(
      WAIT_FOR_SIGNAL_SQL,
      [
        ...this.fenceArgs(f),
        this.options.worker.leaseTtlMs,
        w.name,
        w.signalIndex,
        `$signal:${w.name}`,
        recordset(w.records),
        w.deadline,
        w.deadline === null ? w.timeoutMs : null,
        w.recordDeadline ? w.deadlineIndex : null,
        `$deadline:${w.name}`,
        w.reason,
        eventPayload(this.options, 'run.waiting_for_signal', { name: w.name, timeoutMs: w.timeoutMs }),
        w.seq,
        w.attemptsDelta,
      ],
      'dx_wait_signal',
    );
    if (!rows.length) throw new LeaseLostError(f.runId, f.epoch, `wait for signal ${w.name}`);
    const r = rows[0];
    return {
      outcome: r.outcome,
      payload: r.payload,
      availableAt: finiteDate(r.available_at),
      cancelRequested: r.cancel_requested,
    };
  }
}

function finiteDate(v: unknown): Date | null {
  return v instanceof Date && Number.isFinite(v.getTime()) ? v : null;
}

/** A wait for a signal: where it is recorded and what to do when nothing is there yet. */
export interface SignalWaitWrite {
  name: string;
  deadlineIndex: number;
  signalIndex: number;
  /** The recorded deadline (ISO), or null when there is none yet or the wait has no timeout. */
  deadline: string | null;
  /** Record the deadline now (the first time the wait is reached). */
  recordDeadline: boolean;
  timeoutMs: number | null;
  reason: string;
  attemptsDelta: number;
  seq: number;
  records: CheckpointWrite[];
}

/** What the wait statement did. */
export interface SignalWaitOutcome {
  outcome: 'consumed' | 'timed_out' | 'parked';
  payload: unknown;
  availableAt: Date | null;
  cancelRequested: boolean;
}
