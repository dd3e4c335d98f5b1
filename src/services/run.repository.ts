import { Inject, Injectable } from '@nestjs/common';
import { DURABLE_EXECUTION_OPTIONS, WAKE_CHANNEL } from '../durable-execution.constants';
import { DurableRegistry } from '../discovery/durable.registry';
import { IdempotencyConflictError } from '../errors/idempotency-conflict.error';
import { InvalidRunStateError } from '../errors/invalid-run-state.error';
import { RunNotFoundError } from '../errors/run-not-found.error';
import { UnknownRunKindError } from '../errors/unknown-run-kind.error';
import { RUN_STATUSES } from '../interfaces/run.interface';
import type {
  CheckpointView,
  ListRunsQuery,
  RunEvent,
  RunPage,
  RunStatus,
  RunView,
  StartRunOptions,
  StartRunResult,
} from '../interfaces/run.interface';
import type { ResolvedDurableOptions } from '../options/durable-execution-options.interface';
import { DurableDatabase } from '../persistence/durable-database';
import { eventPayload } from '../persistence/event-payload';
import { toEvent, toRunView } from '../persistence/run-row.mapper';
import { CANCEL_RUN_SQL } from '../persistence/sql/cancel-run.sql';
import { RETRY_RUN_SQL } from '../persistence/sql/retry-run.sql';
import { RUN_BY_KEY_SQL, START_RUN_SQL } from '../persistence/sql/start-run.sql';
import { toStoredJson } from '../util/json';
import { CheckpointService } from './checkpoint.service';
import { approveCommand, resolveCommand } from './command-decisions';
import type { ApprovalDecision, CommandResolution } from '../interfaces/command.interface';
import { SEND_SIGNAL_SQL } from '../persistence/sql/signal.sql';
import { InvalidArgumentError } from '../errors/invalid-argument.error';

const argumentError = (field: string, reason: string) => new InvalidArgumentError(field, reason);

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const STATUSES = RUN_STATUSES;

/**
 * What controllers inject: start runs, read them and their trail, cancel and re-drive them.
 * @example
 * ```ts
 * const { run } = await this.runs.start('purchase-order', dto, { idempotencyKey: dto.orderRef });
 * ```
 */
@Injectable()
export class RunRepository {
  constructor(
    private readonly db: DurableDatabase,
    private readonly registry: DurableRegistry,
    private readonly checkpointService: CheckpointService,
    @Inject(DURABLE_EXECUTION_OPTIONS) private readonly options: ResolvedDurableOptions,
  ) {}

  /**
   * Starts a run of `kind`. With an `idempotencyKey`, a second start (even a concurrent one from another
   * connection) returns the existing run and `created: false`. Input must be plain JSON.
   */
  async start<I>(kind: string, input: I, opts: StartRunOptions = {}): Promise<StartRunResult> {
    const wf = this.registry.getWorkflow(kind);
    if (!wf) throw new UnknownRunKindError(kind, this.registry.kinds());
    const inputJson = toStoredJson(input, `input of run kind "${kind}"`, this.options.limits.maxInputBytes);
    const maxAttempts = opts.maxAttempts ?? wf.meta.maxAttempts ?? this.options.defaultMaxAttempts;
    if (!Number.isInteger(maxAttempts) || maxAttempts < 1) {
      throw argumentError('maxAttempts', `must be a positive integer, got ${String(opts.maxAttempts)}`);
    }
    if (
      opts.idempotencyKey !== undefined &&
      (typeof opts.idempotencyKey !== 'string' || !opts.idempotencyKey)
    ) {
      throw argumentError('idempotencyKey', 'must be a non-empty string');
    }
    if (opts.runAt !== undefined && !(opts.runAt instanceof Date && !isNaN(opts.runAt.getTime()))) {
      throw argumentError('runAt', 'must be a valid Date');
    }
    const priority = opts.priority ?? 0;
    if (!Number.isInteger(priority)) throw argumentError('priority', 'must be an integer');

    const { rows } = await this.db.query(
      START_RUN_SQL,
      [
        kind,
        inputJson,
        opts.idempotencyKey ?? null,
        maxAttempts,
        opts.runAt ?? null,
        priority,
        eventPayload(this.options, 'run.created', { kind, idempotencyKey: opts.idempotencyKey ?? null }),
        WAKE_CHANNEL,
      ],
      'dx_start',
    );
    if (rows.length) return { run: toRunView(rows[0]), created: true };

    const existing = (await this.db.query(RUN_BY_KEY_SQL, [opts.idempotencyKey])).rows[0];
    if (existing.kind !== kind) {
      throw new IdempotencyConflictError(opts.idempotencyKey!, existing.id, existing.kind, kind);
    }
    return { run: toRunView(existing), created: false };
  }

  /** The run with this id, or null. */
  async get(id: string): Promise<RunView | null> {
    if (!UUID.test(id)) return null;
    const { rows } = await this.db.query(`select * from ai_runs where id = $1`, [id], 'dx_get_run');
    return rows.length ? toRunView(rows[0]) : null;
  }

  /** Runs newest first, filtered, with keyset pagination (`after` = previous page's `next`). */
  async list(query: ListRunsQuery = {}): Promise<RunPage> {
    const limit = query.limit ?? 50;
    if (!Number.isInteger(limit) || limit < 1 || limit > 500) throw argumentError('limit', 'must be 1..500');
    const statuses = query.status === undefined ? null : ([] as RunStatus[]).concat(query.status);
    for (const s of statuses ?? []) {
      if (!STATUSES.includes(s)) throw argumentError('status', `"${s}" is not one of ${STATUSES.join(', ')}`);
    }
    let afterTs: string | null = null;
    let afterId: string | null = null;
    if (query.after !== undefined) {
      const decoded = Buffer.from(query.after, 'base64url').toString('utf8').split('|');
      if (decoded.length !== 2 || !UUID.test(decoded[1]) || isNaN(Date.parse(decoded[0]))) {
        throw argumentError('after', 'is not a cursor returned by list()');
      }
      [afterTs, afterId] = decoded;
    }
    const { rows } = await this.db.query(
      `select *, to_char(created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as created_key
         from ai_runs
        where ($1::text[] is null or status = any($1))
          and ($2::text is null or kind = $2)
          and ($3::timestamptz is null or (created_at, id) < ($3::timestamptz, $4::uuid))
        order by created_at desc, id desc
        limit $5`,
      [statuses, query.kind ?? null, afterTs, afterId, limit + 1],
    );
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    return {
      items: page.map(toRunView),
      next:
        rows.length > limit ? Buffer.from(`${last.created_key}|${last.id}`).toString('base64url') : undefined,
    };
  }

  /**
   * Requests cancellation. A pending or waiting run is cancelled at once; a running one stops at its
   * next heartbeat or step boundary. Throws for an unknown or finished run. `by` (who asked) is kept
   * in the event.
   */
  async cancel(id: string, reason?: string, by?: string): Promise<RunView> {
    if (!UUID.test(id)) throw new RunNotFoundError(id);
    const { rows } = await this.db.query(CANCEL_RUN_SQL, [
      id,
      reason ?? null,
      eventPayload(this.options, 'run.cancel', { reason: reason ?? null, ...(by ? { by } : {}) }),
    ]);
    if (!rows.length) throw new RunNotFoundError(id);
    if (!rows[0].status) throw new InvalidRunStateError(id, rows[0].previous_status, 'cancel');
    return (await this.get(id))!;
  }

  /** Re-drives a dead-lettered or failed run from its last checkpoint (replay skips committed steps). */
  async retry(id: string, by?: string): Promise<RunView> {
    if (!UUID.test(id)) throw new RunNotFoundError(id);
    const { rows } = await this.db.query(RETRY_RUN_SQL, [
      id,
      eventPayload(this.options, 'run.retried', { by: by ?? null }),
      WAKE_CHANNEL,
    ]);
    if (!rows.length) throw new RunNotFoundError(id);
    if (!['dead_lettered', 'failed'].includes(rows[0].previous_status)) {
      throw new InvalidRunStateError(id, rows[0].previous_status, 'retry');
    }
    return (await this.get(id))!;
  }

  /**
   * Stores a signal durably and wakes the run if it waits. A signal sent before the run reaches its
   * `ctx.waitForSignal(name)` is kept for it. Throws for an unknown or finished run. `by` (who sent
   * it) is kept in the `signal.sent` event.
   */
  async signal(id: string, name: string, payload: unknown = null, by?: string): Promise<void> {
    if (!UUID.test(id)) throw new RunNotFoundError(id);
    if (typeof name !== 'string' || !name) throw argumentError('name', 'must be a non-empty string');
    const json = toStoredJson(payload, `payload of signal "${name}"`, this.options.limits.maxInputBytes);
    const { rows } = await this.db.query(SEND_SIGNAL_SQL, [id, name, json, WAKE_CHANNEL, by ?? null]);
    if (!rows.length) throw new RunNotFoundError(id);
    if (!rows[0].stored) throw new InvalidRunStateError(id, rows[0].status, `signal "${name}" to`);
  }

  /** Approves a command parked for approval (`requiresApproval`); the run resumes and dispatches it. */
  approve(runId: string, idempotencyKey: string, decision: ApprovalDecision): Promise<void> {
    return approveCommand(this.db, this.options, runId, idempotencyKey, decision, true);
  }

  /** Rejects a command parked for approval; the workflow sees CommandFailedError (DURABLE_COMMAND_REJECTED). */
  reject(runId: string, idempotencyKey: string, decision: ApprovalDecision): Promise<void> {
    return approveCommand(this.db, this.options, runId, idempotencyKey, decision, false);
  }

  /**
   * Settles a command whose outcome a crash hid (`inDoubt: 'manual'`, or left by a cancellation):
   * `succeeded` with the result the target reports, `failed` permanently, or `retry` to dispatch it
   * once more with the same key. The run resumes.
   */
  resolveCommand(idempotencyKey: string, resolution: CommandResolution, by = 'operator'): Promise<void> {
    return resolveCommand(this.db, this.options, idempotencyKey, resolution, by);
  }

  /** The run's event trail, oldest first. */
  async events(id: string): Promise<RunEvent[]> {
    if (!UUID.test(id)) return [];
    const { rows } = await this.db.query(`select * from ai_events where run_id = $1 order by id`, [id]);
    return rows.map(toEvent);
  }

  /** The run's checkpoints in step order. */
  async checkpoints(id: string): Promise<CheckpointView[]> {
    if (!UUID.test(id)) return [];
    return this.checkpointService.list(id);
  }
}
