import { Inject, Injectable } from '@nestjs/common';
import { DURABLE_EXECUTION_OPTIONS } from '../durable-execution.constants';
import { DurableRegistry } from '../engine/durable.registry';
import type { WorkflowSignals } from '../engine/run-context';
import type { ApprovalDecision, CommandResolution } from '../interfaces/command.interface';
import type {
  PatchStatus,
  CheckpointView,
  ListRunsQuery,
  RunEvent,
  RunHistoryQuery,
  RunPage,
  KindVersionView,
  RetryHeldOptions,
  RunView,
  StartRunOptions,
  StartRunResult,
  WorkflowClass,
  WorkflowInput,
  WorkflowOutput,
} from '../interfaces/run.interface';
import type { SignalName, SignalPayload, StorableAs } from '../interfaces/stored-types.interface';
import type { ResolvedDurableOptions } from '../options/durable-execution-options.interface';
import { CommandStore } from '../store/command.store';
import { RunControlStore } from '../store/run-control.store';
import { RunReadStore } from '../store/run-reads.store';
import { WorkerPresenceStore } from '../store/worker-presence.store';
import { requireHistoryRange } from '../util/run-cursor';
import { requireUuid } from '../util/uuid';
import { approveCommand, resolveCommand } from './command-decisions';
import { RunResultWaiter, withResult } from './run-results';
import { RunStarter, workflowKind } from './run-start';
import { kindVersions, listRuns, patchStatusOf } from './run-queries';
import * as actions from './run-actions';
import { RunStreamReader } from './run-stream';
import type { StreamEntry, StreamQuery, WatchOptions } from '../interfaces/stream.interface';
import type { ForkRunOptions, ForkRunResult } from '../interfaces/run-fork.interface';

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
  private readonly starter: RunStarter;
  private readonly acts: actions.RunActionDeps;

  /** @internal Created by Nest dependency injection: not part of the API. */
  constructor(
    registry: DurableRegistry,
    private readonly reads: RunReadStore,
    private readonly control: RunControlStore,
    private readonly commands: CommandStore,
    private readonly results: RunResultWaiter,
    @Inject(DURABLE_EXECUTION_OPTIONS) private readonly options: ResolvedDurableOptions,
    presence: WorkerPresenceStore,
    private readonly streams: RunStreamReader,
  ) {
    this.starter = new RunStarter(registry, control, options, presence);
    this.acts = { control, reads, options, registry };
  }

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
   * `maxAttempts`); the first start of a kind no live worker serves (`ai_workers`) logs a warning, and with
   * `unservedKinds: 'refuse'` every such start throws NoWorkerForKindError instead. A process that runs a
   * worker refuses a kind it does not register (UnknownRunKindError): there it is most likely a typo.
   * With a class, an input type that storing would change (a `Date` field) does not compile.
   */
  async start<W extends WorkflowClass>(
    workflow: W,
    input: StorableAs<WorkflowInput<W>>,
    opts?: StartRunOptions,
  ): Promise<StartRunResult<WorkflowInput<W>, WorkflowOutput<W>>>;
  async start<I>(kind: string, input: I, opts?: StartRunOptions): Promise<StartRunResult<I>>;
  async start(
    kindOrWorkflow: string | WorkflowClass,
    input: unknown,
    opts: StartRunOptions = {},
  ): Promise<StartRunResult> {
    return withResult(await this.starter.start(kindOrWorkflow, input, opts), this.results) as StartRunResult;
  }

  /**
   * Waits for the run to end and returns its output; throws RunFailedError when it failed, was
   * dead-lettered or cancelled, ResultTimeoutError after `timeoutMs` (default 30 s; the run goes on).
   * Waits through NOTIFY (the run is marked so that its end is announced), not by polling. With the
   * workflow class first (`result(PurchaseOrderWorkflow, id)`) the output is typed from its `run()`,
   * and a run of another kind is an InvalidArgumentError.
   */
  async result<W extends WorkflowClass>(
    workflow: W,
    id: string,
    opts?: { timeoutMs?: number },
  ): Promise<WorkflowOutput<W>>;
  async result<O = unknown>(id: string, opts?: { timeoutMs?: number }): Promise<O>;
  async result(...args: unknown[]): Promise<unknown> {
    const kind = typeof args[0] === 'function' ? workflowKind(args.shift() as WorkflowClass, 'result') : null;
    const [id, opts] = args as [string, { timeoutMs?: number }?];
    return this.results.wait(id, opts?.timeoutMs, kind);
  }

  /** The run with this id, or null. An id that is not a UUID is an InvalidArgumentError. */
  async get(id: string): Promise<RunView | null> {
    return this.reads.get(requireUuid(id, 'id'));
  }

  /** Runs newest first, filtered, with keyset pagination (`after` = previous page's `next`). */
  async list(query: ListRunsQuery = {}): Promise<RunPage> {
    return listRuns(this.reads, query);
  }

  /**
   * Where `kind`'s open runs stand with `ctx.patched(patchId)`: how many took the new path, and how many
   * may still take the old one (`openMayTakeOldPath`; at 0 the old path can go, see `ctx.deprecatePatch`).
   */
  patchStatus(kind: string, patchId: string): Promise<PatchStatus> {
    return patchStatusOf(this.reads, kind, patchId);
  }

  /**
   * For each version of `kind` (of every kind when omitted): the unfinished runs pinned to it and the live
   * workers that register it. A version with no run left can lose its class (or its workers).
   */
  versions(kind?: string): Promise<KindVersionView[]> {
    return kindVersions(this.reads, kind);
  }

  /**
   * Requests cancellation. A pending or waiting run is cancelled at once; a running one stops at its
   * next heartbeat or step boundary. Throws for an unknown or finished run. `by` (who asked) is kept
   * in the event.
   */
  cancel(id: string, reason?: string, by?: string): Promise<RunView> {
    return actions.cancelRun(this.acts, id, reason, by);
  }

  /**
   * Re-drives a dead-lettered or failed run, or one held for non-determinism (`run.held`, once a deploy
   * that replays it runs), from its last checkpoint (replay skips committed steps).
   */
  retry(id: string, by?: string): Promise<RunView> {
    return actions.retryRun(this.acts, id, by);
  }

  /**
   * Time travel (docs/TIME-TRAVEL.md): a new run inheriting run `runId`'s record before `opts.fromStep`
   * (never executed or sent again) that executes from there; its new commands are keyed apart.
   * ForkRefusedError for a cut that would inherit what the original has not settled.
   */
  async fork<I = unknown, O = unknown>(runId: string, opts: ForkRunOptions<I>): Promise<ForkRunResult<I, O>> {
    return withResult(await actions.forkRun(this.acts, runId, opts), this.results) as ForkRunResult<I, O>;
  }

  /**
   * Re-drives up to `limit` (1000) runs of `kind` held on non-determinism (with `version`: only those
   * pinned to it), oldest first, in one statement.
   */
  retryHeld(kind: string, opts: RetryHeldOptions = {}): Promise<{ retried: number }> {
    return actions.retryHeldRuns(this.acts, kind, opts);
  }

  /**
   * Stores a signal durably and wakes the run if it waits. A signal sent before the run reaches its
   * `ctx.waitForSignal(name)` is kept for it. Throws for an unknown or finished run. `by` (who sent
   * it) is kept in the `signal.sent` event. With the workflow class first
   * (`signal(ApprovalWorkflow, id, 'approve', payload)`), the name and payload are checked by the compiler
   * against the signals its `run(input, ctx: RunContext<Signals>)` declares, and a run of another kind is
   * refused (nothing stored).
   */
  async signal<W extends WorkflowClass, K extends SignalName<WorkflowSignals<W>>>(
    workflow: W,
    id: string,
    name: K,
    payload: StorableAs<SignalPayload<WorkflowSignals<W>, K>>,
    by?: string,
  ): Promise<void>;
  async signal(id: string, name: string, payload?: unknown, by?: string): Promise<void>;
  async signal(...args: unknown[]): Promise<void> {
    const kind = typeof args[0] === 'function' ? workflowKind(args.shift() as WorkflowClass, 'signal') : null;
    return actions.sendSignal(this.acts, kind, ...(args as [string, string, unknown?, string?]));
  }

  /** Approves a command parked for approval (`requiresApproval`); the run resumes and dispatches it. */
  approve(runId: string, idempotencyKey: string, decision: ApprovalDecision): Promise<void> {
    return approveCommand(this.commands, this.options, runId, idempotencyKey, decision, true);
  }

  /** Rejects a command parked for approval; the workflow sees CommandFailedError (DURABLE_COMMAND_REJECTED). */
  reject(runId: string, idempotencyKey: string, decision: ApprovalDecision): Promise<void> {
    return approveCommand(this.commands, this.options, runId, idempotencyKey, decision, false);
  }

  /**
   * Settles a command whose outcome a crash hid (`inDoubt: 'manual'`, or left by a cancellation):
   * `succeeded` with the result the target reports, `failed` permanently, or `retry` to dispatch it
   * once more with the same key. The run resumes.
   */
  resolveCommand(idempotencyKey: string, resolution: CommandResolution, by = 'operator'): Promise<void> {
    return resolveCommand(this.commands, this.options, idempotencyKey, resolution, by);
  }

  /**
   * The run's event trail, oldest first; with a `query`, one part of it by event id (`after` an id
   * oldest first, `before` one or `newestFirst` newest first, at most `limit`), through the
   * (run_id, id) index. Bad paging options are an InvalidArgumentError naming the field.
   */
  async events(id: string, query?: RunHistoryQuery): Promise<RunEvent[]> {
    return this.reads.events(requireUuid(id, 'id'), requireHistoryRange(query));
  }

  /** The run's checkpoints in step order; with a `query`, one part of them by step index (as `events`). */
  async checkpoints(id: string, query?: RunHistoryQuery): Promise<CheckpointView[]> {
    return this.reads.checkpoints(requireUuid(id, 'id'), requireHistoryRange(query));
  }

  /** The run's progress stream (`ctx.emit`) after `from`, in order, at most `limit` (500; 1000 at most). */
  stream<D = unknown>(id: string, query?: StreamQuery): Promise<StreamEntry<D>[]> {
    return this.streams.read(id, query) as Promise<StreamEntry<D>[]>;
  }

  /**
   * Follows the run's stream live: `for await (const e of runs.watch(id, { from }))` yields every entry
   * after `from` once, in order (NOTIFY, with a read at least every `pollMs`), and ends when the run
   * has ended and its last entry was yielded, or `signal` aborts. Resume after a reconnect with
   * `from: lastSeq`. RunNotFoundError (at the first `next()`) for an unknown run.
   */
  watch<D = unknown>(id: string, options?: WatchOptions): AsyncIterableIterator<StreamEntry<D>> {
    return this.streams.watch(id, options) as AsyncIterableIterator<StreamEntry<D>>;
  }

  /** @internal For `runEventStream`: one of `limits.maxStreamClients` SSE slots, or TooManyStreamClientsError. */
  openStreamClient(): () => void {
    return this.streams.openClient();
  }
}
