import { Inject, Injectable, Logger } from '@nestjs/common';
import { DURABLE_EXECUTION_OPTIONS, WAKE_CHANNEL } from '../durable-execution.constants';
import { DurableRegistry } from '../discovery/durable.registry';
import { IdempotencyConflictError } from '../errors/idempotency-conflict.error';
import { InvalidRunStateError } from '../errors/invalid-run-state.error';
import { RunNotFoundError } from '../errors/run-not-found.error';
import { UnknownRunKindError } from '../errors/unknown-run-kind.error';
import { DurableUsageError } from '../errors/durable-usage.error';
import { WORKFLOW_METADATA } from '../durable-execution.constants';
import type { WorkflowMetadata } from '../interfaces/step-options.interface';
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
  WorkflowClass,
  WorkflowInput,
  WorkflowOutput,
} from '../interfaces/run.interface';
import type { ResolvedDurableOptions } from '../options/durable-execution-options.interface';
import { DurableDatabase } from '../store/durable-database';
import { eventPayload } from '../store/event-payload';
import { toEvent, toRunView } from '../store/run-row.mapper';
import { CANCEL_RUN_SQL } from '../store/sql/cancel-run.sql';
import { RETRY_RUN_SQL } from '../store/sql/retry-run.sql';
import { RUN_BY_KEY_SQL, START_RUN_SQL } from '../store/sql/start-run.sql';
import { requireInt4, requireText, requireTimestamp } from '../util/arguments';
import { MAX_IDEMPOTENCY_KEY_BYTES, MAX_SIGNAL_NAME_BYTES } from '../util/arguments';
import { toStoredJson } from '../util/json';
import { CURSOR_KEY_SQL, pageOfRuns } from '../util/run-cursor';
import { requireUuid } from '../util/uuid';
import { CheckpointService } from '../store/checkpoint.service';
import { RunResultWaiter } from './run-results';
import { RunFailedError } from '../errors/run-failed.error';
import { ResultTimeoutError } from '../errors/result-timeout.error';
import { approveCommand, resolveCommand } from './command-decisions';
import type { ApprovalDecision, CommandResolution } from '../interfaces/command.interface';
import { SEND_SIGNAL_SQL } from '../store/sql/signal.sql';
import { InvalidArgumentError } from '../errors/invalid-argument.error';

const argumentError = (field: string, reason: string) => new InvalidArgumentError(field, reason);

const STATUSES = RUN_STATUSES;

/**
 * What controllers inject: start runs, read them and their trail, cancel and re-drive them. Its reads
 * are the app's own API and return run data as stored: the module's `redact` hook is not applied (only
 * event payloads were redacted when stored). The admin API and inspector page redact what they show.
 * @example
 * ```ts
 * const { run } = await this.runs.start('purchase-order', dto, { idempotencyKey: dto.orderRef });
 * ```
 */
@Injectable()
export class RunRepository {
  private readonly logger = new Logger('DurableExecution');
  /** Unregistered kinds a producer-only process started, each logged once (debug). */
  private readonly unregisteredKinds = new Set<string>();

  constructor(
    private readonly db: DurableDatabase,
    private readonly registry: DurableRegistry,
    private readonly checkpointService: CheckpointService,
    private readonly results: RunResultWaiter,
    @Inject(DURABLE_EXECUTION_OPTIONS) private readonly options: ResolvedDurableOptions,
  ) {}

  /**
   * Starts a run of `kind`, or of a `@DurableWorkflow` class (`start(PurchaseOrderWorkflow, input)`:
   * input and output are typed from its `run()`; a producer process may import the class only for its
   * type and kind, without registering it as a provider). With an `idempotencyKey` (at most MAX_IDEMPOTENCY_KEY_BYTES), a second
   * start with the same kind and an equal input (even a concurrent one from another connection)
   * returns the existing run and `created: false`; another kind or input under the key is an
   * IdempotencyConflictError. Input must be plain JSON. Bad arguments throw before anything is written.
   *
   * Producer-only processes: with `worker: { enabled: false }` (an API pod), `kind` need not be
   * registered here: the run is written for the workers that do register `@DurableWorkflow(kind)`, with
   * `opts.maxAttempts` or the module's `defaultMaxAttempts` (this process cannot see the workflow's own
   * `maxAttempts`); the first start of each such kind is logged at debug level. A process that runs a
   * worker refuses a kind it does not register (UnknownRunKindError): there it is most likely a typo.
   */
  async start<W extends WorkflowClass>(
    workflow: W,
    input: WorkflowInput<W>,
    opts?: StartRunOptions,
  ): Promise<StartRunResult<WorkflowInput<W>, WorkflowOutput<W>>>;
  async start<I>(kind: string, input: I, opts?: StartRunOptions): Promise<StartRunResult<I>>;
  async start(
    kindOrWorkflow: string | WorkflowClass,
    input: unknown,
    opts: StartRunOptions = {},
  ): Promise<StartRunResult> {
    const kind = typeof kindOrWorkflow === 'function' ? workflowKind(kindOrWorkflow) : kindOrWorkflow;
    const wf = this.registry.getWorkflow(kind);
    if (!wf) {
      if (this.options.worker.enabled) throw new UnknownRunKindError(kind, this.registry.kinds());
      requireText(kind, 'kind');
      if (!this.unregisteredKinds.has(kind)) {
        this.unregisteredKinds.add(kind);
        this.logger.debug(
          `starting runs of kind '${kind}', not registered in this producer-only process (worker.enabled: false); a worker that registers it will run them`,
        );
      }
    }
    const inputJson = toStoredJson(input, `input of run kind "${kind}"`, this.options.limits.maxInputBytes);
    const maxAttempts = requireInt4(
      opts.maxAttempts ?? wf?.meta.maxAttempts ?? this.options.defaultMaxAttempts,
      'maxAttempts',
      1,
    );
    const key = requireText(opts.idempotencyKey, 'idempotencyKey', {
      optional: true,
      maxBytes: MAX_IDEMPOTENCY_KEY_BYTES,
    });
    const runAt = opts.runAt === undefined ? null : requireTimestamp(opts.runAt, 'runAt');
    const priority = requireInt4(opts.priority ?? 0, 'priority');
    const event = eventPayload(this.options, 'run.created', { kind, idempotencyKey: key ?? null });
    const params = [kind, inputJson, key ?? null, maxAttempts, runAt, priority, event, WAKE_CHANNEL];

    // A key taken by a run that retention deletes right then: the second insert gets it.
    for (let attempt = 0; ; attempt++) {
      const { rows } = await this.db.query(START_RUN_SQL, params, 'dx_start');
      if (rows.length) return { run: toRunView(rows[0]), created: true };
      const existing = (await this.db.query(RUN_BY_KEY_SQL, [key, inputJson], 'dx_run_by_key')).rows[0];
      if (!existing && attempt === 0) continue;
      if (!existing) throw new Error(`idempotency key "${key}" conflicted but no run holds it`);
      if (existing.kind !== kind || !existing.same_input) {
        throw new IdempotencyConflictError(key!, existing.id, existing.kind, kind);
      }
      return { run: toRunView(existing), created: false };
    }
  }

  /**
   * Waits for the run to end and returns its output; throws RunFailedError when it failed, was
   * dead-lettered or cancelled, ResultTimeoutError after `timeoutMs` (default 30 s; the run goes on).
   * Waits through NOTIFY (the run is marked so that its end is announced), not by polling.
   */
  async result<O = unknown>(id: string, opts: { timeoutMs?: number } = {}): Promise<O> {
    requireUuid(id, 'id');
    const timeoutMs = opts.timeoutMs ?? 30_000;
    if (!Number.isFinite(timeoutMs) || timeoutMs < 0)
      throw argumentError('timeoutMs', `must be a finite number >= 0, got ${timeoutMs}`);
    await this.results.listen();
    const deadline = Date.now() + timeoutMs;
    let row = await this.awaitable(id);
    while (!['succeeded', 'failed', 'dead_lettered', 'cancelled'].includes(row.status)) {
      const left = deadline - Date.now();
      if (left <= 0) throw new ResultTimeoutError(id, timeoutMs, row.status);
      await this.results.next(id, left);
      row = await this.awaitable(id);
    }
    if (row.status !== 'succeeded')
      throw new RunFailedError(id, row.status as 'failed' | 'dead_lettered' | 'cancelled', row.error);
    return row.output as O;
  }

  /** Marks the run to be announced when it ends (once), then reads it in a fresh snapshot. */
  private async awaitable(
    id: string,
  ): Promise<{ status: RunStatus; output: unknown; error: { message?: string } | null }> {
    await this.db.query(
      `update ai_runs set notify_on_finish = true
        where id = $1 and not notify_on_finish and status in ('pending', 'running', 'waiting')`,
      [id],
      'dx_await_run',
    );
    const { rows } = await this.db.query(
      `select status, output, error from ai_runs where id = $1`,
      [id],
      'dx_run_outcome',
    );
    if (!rows.length) throw new RunNotFoundError(id);
    return rows[0] as { status: RunStatus; output: unknown; error: { message?: string } | null };
  }

  /** The run with this id, or null. An id that is not a UUID is an InvalidArgumentError. */
  async get(id: string): Promise<RunView | null> {
    requireUuid(id, 'id');
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
    const kind = requireText(query.kind, 'kind', { optional: true });
    return pageOfRuns(query.after, limit, async (after, take) => {
      const { rows } = await this.db.query(
        `select *, ${CURSOR_KEY_SQL} as created_key
         from ai_runs
        where ($1::text[] is null or status = any($1))
          and ($2::text is null or kind = $2)
          and ($3::timestamptz is null or (created_at, id) < ($3::timestamptz, $4::uuid))
        order by created_at desc, id desc
        limit $5`,
        [statuses, kind ?? null, after?.[0] ?? null, after?.[1] ?? null, take],
      );
      return rows.map((r) => ({ item: toRunView(r), createdKey: r.created_key, id: r.id }));
    });
  }

  /**
   * Requests cancellation. A pending or waiting run is cancelled at once; a running one stops at its
   * next heartbeat or step boundary. Throws for an unknown or finished run. `by` (who asked) is kept
   * in the event.
   */
  async cancel(id: string, reason?: string, by?: string): Promise<RunView> {
    requireUuid(id, 'id');
    requireText(reason, 'reason', { optional: true, allowEmpty: true });
    requireText(by, 'by', { optional: true, allowEmpty: true });
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
    requireUuid(id, 'id');
    requireText(by, 'by', { optional: true, allowEmpty: true });
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
    requireUuid(id, 'id');
    requireText(name, 'name', { maxBytes: MAX_SIGNAL_NAME_BYTES });
    requireText(by, 'by', { optional: true, allowEmpty: true });
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
    requireUuid(id, 'id');
    const { rows } = await this.db.query(`select * from ai_events where run_id = $1 order by id`, [id]);
    return rows.map(toEvent);
  }

  /** The run's checkpoints in step order. */
  async checkpoints(id: string): Promise<CheckpointView[]> {
    requireUuid(id, 'id');
    return this.checkpointService.list(id);
  }
}

/** The kind a `@DurableWorkflow(kind)` class declares. */
function workflowKind(workflow: WorkflowClass): string {
  const meta = Reflect.getMetadata(WORKFLOW_METADATA, workflow) as WorkflowMetadata | undefined;
  if (!meta?.kind) {
    throw new DurableUsageError(
      `RunRepository.start(${workflow.name || 'class'}, …): the class has no @DurableWorkflow(kind) decorator; decorate it or pass the kind as a string`,
    );
  }
  return meta.kind;
}
