import { Inject, Injectable } from '@nestjs/common';
import { DURABLE_EXECUTION_OPTIONS, WAKE_CHANNEL } from '../durable-execution.constants';
import { LeaseLostError } from '../errors/lease-lost.error';
import type { RunCursor, RunStatus } from '../interfaces/run.interface';
import type { ResolvedDurableOptions } from '../options/durable-execution-options.interface';
import { DurableDatabase } from './durable-database';
import { eventPayload } from './event-payload';
import { CLAIM_RUNS_SQL } from './sql/claim-runs.sql';
import { PROGRESS_SQL, STEP_WRITE_SQL } from './sql/commit-step.sql';
import { FINISH_RUN_SQL } from './sql/finish-run.sql';
import { HEARTBEAT_SQL } from './sql/heartbeat.sql';

/** A run this worker just claimed. */
export interface ClaimedRun {
  id: string;
  kind: string;
  input: unknown;
  epoch: number;
  cursor: RunCursor;
  attempts: number;
  maxAttempts: number;
  cancelRequested: boolean;
  cancelReason: string | null;
  /** The database clock at claim time (sleeps and signal timeouts compare against it). */
  dbNow: Date;
  /** `performance.now()` when the claim was sent: the lease runs at least `leaseTtlMs` from there. */
  sentAt: number;
}

/** The (run, worker, epoch) triple every fenced write carries. */
export interface Fence {
  runId: string;
  workerId: string;
  epoch: number;
}

/** A checkpoint row to insert: serialised output (JSON text) plus optional meta. */
export interface CheckpointWrite {
  index: number;
  name: string;
  outputJson: string;
  metaJson?: string | null;
  /** Delivery order of a result (null for recorded values). */
  seq?: number | null;
  /** Hash of the call's name and arguments. */
  fingerprint?: string | null;
}

/** A fenced transition out of `running`. */
export interface FinishWrite {
  status: Exclude<RunStatus, 'running' | 'pending'>;
  outputJson?: string | null;
  error?: Record<string, unknown> | null;
  delayMs?: number;
  attemptsDelta?: number;
  records?: CheckpointWrite[];
  event: string;
  payload: Record<string, unknown>;
  parkedReason?: string | null;
}

/** Builds the jsonb_to_recordset argument without re-serialising already serialised outputs. */
export function recordset(rows: CheckpointWrite[]): string {
  return `[${rows
    .map(
      (r) =>
        `{"step_index":${r.index},"step_name":${JSON.stringify(r.name)},"output":${r.outputJson},"meta":${r.metaJson ?? 'null'},"seq":${r.seq ?? 'null'},"fingerprint":${r.fingerprint ? JSON.stringify(r.fingerprint) : 'null'}}`,
    )
    .join(',')}]`;
}

/**
 * Claims, heartbeats and every fenced write on a run. Each method is one SQL statement (one round
 * trip); a fenced write that matches no row throws LeaseLostError.
 */
@Injectable()
export class LeaseService {
  constructor(
    private readonly db: DurableDatabase,
    @Inject(DURABLE_EXECUTION_OPTIONS) private readonly options: ResolvedDurableOptions,
  ) {}

  private get ttl(): number {
    return this.options.worker.leaseTtlMs;
  }

  /**
   * Claims up to `limit` due runs of `kinds` for `workerId` (SKIP LOCKED; raises epoch and attempts),
   * never one of `exclude` (runs this process still drives, e.g. a stale attempt stuck in a call).
   */
  async claim(
    workerId: string,
    kinds: string[],
    limit: number,
    exclude: string[] = [],
  ): Promise<ClaimedRun[]> {
    if (limit <= 0 || kinds.length === 0) return [];
    const sentAt = performance.now();
    const { rows } = await this.db.query(
      CLAIM_RUNS_SQL,
      [workerId, kinds, limit, this.ttl, exclude],
      'dx_claim',
    );
    return rows.map((r) => ({
      id: r.id,
      kind: r.kind,
      input: r.input,
      epoch: Number(r.epoch),
      cursor: r.cursor,
      attempts: r.attempts,
      maxAttempts: r.max_attempts,
      cancelRequested: r.cancel_requested,
      cancelReason: r.cancel_reason,
      dbNow: r.db_now,
      sentAt,
    }));
  }

  /**
   * The fenced step write (commit, or `started` mark when `progressMade` is false). Returns whether
   * cancellation was requested. Throws LeaseLostError when the fence no longer matches.
   */
  async writeStep(
    fence: Fence,
    cursor: RunCursor,
    checkpoints: CheckpointWrite[],
    event: string,
    payload: Record<string, unknown>,
    progressMade: boolean,
  ): Promise<{ cancelRequested: boolean }> {
    const { rows } = await this.db.query(
      STEP_WRITE_SQL,
      [
        fence.runId,
        fence.workerId,
        fence.epoch,
        JSON.stringify(cursor),
        this.ttl,
        recordset(checkpoints),
        cursor.attempt,
        event,
        eventPayload(this.options, event, payload),
        progressMade,
      ],
      'dx_step_write',
    );
    if (!rows.length) throw new LeaseLostError(fence.runId, fence.epoch, `${event} of step ${cursor.name}`);
    return { cancelRequested: rows[0].cancel_requested };
  }

  /** Moves the intra-step cursor (ctx.progress), fenced. */
  async progress(fence: Fence, cursor: RunCursor): Promise<{ cancelRequested: boolean }> {
    const { rows } = await this.db.query(
      PROGRESS_SQL,
      [fence.runId, fence.workerId, fence.epoch, JSON.stringify(cursor), this.ttl],
      'dx_progress',
    );
    if (!rows.length) throw new LeaseLostError(fence.runId, fence.epoch, `progress of step ${cursor.name}`);
    return { cancelRequested: rows[0].cancel_requested };
  }

  /** Leaves `running` (terminal, or `waiting` with a due time), fenced, with its event. */
  async finish(fence: Fence, w: FinishWrite): Promise<void> {
    const { rowCount } = await this.db.query(
      FINISH_RUN_SQL,
      [
        fence.runId,
        fence.workerId,
        fence.epoch,
        w.status,
        w.outputJson ?? null,
        w.error ? JSON.stringify(w.error) : null,
        w.delayMs ?? 0,
        w.attemptsDelta ?? 0,
        recordset(w.records ?? []),
        w.event,
        eventPayload(this.options, w.event, w.payload),
        w.parkedReason ?? null,
        WAKE_CHANNEL,
      ],
      'dx_finish',
    );
    if (!rowCount) throw new LeaseLostError(fence.runId, fence.epoch, w.event);
  }

  /**
   * Renews one lease (fenced): false when the run is no longer this claim's. Used before a call
   * leaves the process when the local clock says the lease may be close to its end.
   */
  async renew(fence: Fence): Promise<{ alive: boolean; cancelRequested: boolean }> {
    const { rows } = await this.db.query(
      HEARTBEAT_SQL,
      [fence.workerId, [fence.runId], [fence.epoch], this.ttl],
      'dx_heartbeat',
    );
    return { alive: rows.length === 1, cancelRequested: !!rows[0]?.cancel_requested };
  }

  /**
   * Extends the leases of all listed runs in one statement, each fenced by its epoch. Returns the ids
   * still owned (with their cancellation flag); the others were lost.
   */
  async heartbeat(
    workerId: string,
    runs: Array<{ id: string; epoch: number }>,
  ): Promise<Map<string, { cancelRequested: boolean }>> {
    const out = new Map<string, { cancelRequested: boolean }>();
    if (!runs.length) return out;
    const { rows } = await this.db.query(
      HEARTBEAT_SQL,
      [workerId, runs.map((r) => r.id), runs.map((r) => r.epoch), this.ttl],
      'dx_heartbeat',
    );
    for (const r of rows) out.set(r.id, { cancelRequested: r.cancel_requested });
    return out;
  }
}
