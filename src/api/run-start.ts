import { Logger } from '@nestjs/common';
import { WORKFLOW_METADATA } from '../durable-execution.constants';
import { DurableRegistry, versionOf } from '../engine/durable.registry';
import { DurableUsageError } from '../errors/durable-usage.error';
import { IdempotencyConflictError } from '../errors/idempotency-conflict.error';
import { MissingConcurrencyKeyError } from '../errors/missing-concurrency-key.error';
import { NoWorkerForKindError } from '../errors/no-worker-for-kind.error';
import { InvalidArgumentError } from '../errors/invalid-argument.error';
import { UnknownRunKindError } from '../errors/unknown-run-kind.error';
import type { StartRunOptions, StartRunResult, WorkflowClass } from '../interfaces/run.interface';
import type { WorkflowMetadata } from '../interfaces/step-options.interface';
import type { ResolvedDurableOptions } from '../options/durable-execution-options.interface';
import { eventPayload } from '../store/event-payload';
import type { RunControlStore } from '../store/run-control.store';
import type { WorkerPresenceStore } from '../store/worker-presence.store';
import { MAX_IDEMPOTENCY_KEY_BYTES, requireInt4, requireText, requireTimestamp } from '../util/arguments';
import { toStoredJson } from '../util/codec';
import { concurrencyKeyOf, keyFrom, requireShortText, requireTags } from '../util/run-keys';
import { activeTraceparent } from '../util/trace-context';

/**
 * `RunRepository.start` (documented there): resolves and checks the kind, checks every argument before
 * anything is written, then inserts the run or returns the one its idempotency key already names. @internal
 */
export class RunStarter {
  private readonly logger = new Logger('DurableExecution');
  /** Kinds a producer-only process started, each looked up in `ai_workers` at its first start. */
  private readonly startedKinds = new Set<string>();
  /** `unservedKinds: 'refuse'`: when a live worker was last seen serving each kind (ms, this clock). */
  private readonly servedAt = new Map<string, number>();
  /** Whether a worker declares a per-key limit for each kind started by name (`checkKeyed`), and when read. */
  private readonly keyedAt = new Map<string, { keyed: boolean; at: number }>();
  /** Kinds already warned about under `unkeyedStarts: 'warn'`. */
  private readonly warnedKeyless = new Set<string>();

  constructor(
    private readonly registry: DurableRegistry,
    private readonly store: RunControlStore,
    private readonly options: ResolvedDurableOptions,
    private readonly presence: WorkerPresenceStore,
  ) {}

  async start(
    kindOrWorkflow: string | WorkflowClass,
    input: unknown,
    opts: StartRunOptions,
  ): Promise<Omit<StartRunResult, 'result'>> {
    const kind = requireKind(
      typeof kindOrWorkflow === 'function' ? workflowKind(kindOrWorkflow, 'start') : kindOrWorkflow,
    );
    // A class names its own version; a kind, the newest registered here (unless the caller names one).
    const classVersion =
      typeof kindOrWorkflow === 'function' ? versionOf(workflowMeta(kindOrWorkflow)!) : undefined;
    const wf = this.registry.getWorkflow(kind);
    if (!wf && this.options.worker.enabled) throw new UnknownRunKindError(kind, this.registry.kinds());
    // What the run is started with: the class's own declaration when a class is passed (a producer
    // process that does not register it starts it exactly as a worker would), else the registry's.
    const meta =
      (typeof kindOrWorkflow === 'function' ? workflowMeta(kindOrWorkflow) : undefined) ?? wf?.meta;
    // A process without a worker serves nothing itself, registered or not: is a live worker serving it?
    if (!this.options.worker.enabled) await this.checkServed(kind, !wf);
    // Nothing here declares the kind's key function: a run of a keyed kind with no key escapes its limit.
    if (!meta && opts.concurrencyKey === undefined) await this.checkKeyed(kind);
    const inputJson = toStoredJson(input, `input of run kind "${kind}"`, this.options.limits.maxInputBytes);
    const maxAttempts = requireInt4(
      opts.maxAttempts ?? meta?.maxAttempts ?? this.options.defaultMaxAttempts,
      'maxAttempts',
      1,
    );
    const key = requireText(opts.idempotencyKey, 'idempotencyKey', {
      optional: true,
      maxBytes: MAX_IDEMPOTENCY_KEY_BYTES,
    });
    const runAt = opts.runAt === undefined ? null : requireTimestamp(opts.runAt, 'runAt');
    const priority = requireInt4(opts.priority ?? 0, 'priority');
    // The trace of the request that starts the run: every attempt's span joins it (DurableTracing).
    const traceparent = activeTraceparent();
    const event = eventPayload(this.options, 'run.created', {
      kind,
      idempotencyKey: key ?? null,
      ...(traceparent ? { traceparent } : {}),
    });
    const concurrencyKey = concurrencyKeyOf(meta, input, opts.concurrencyKey);
    const tags = requireTags(opts.tags, 'tags');
    const kindVersion =
      opts.version !== undefined
        ? requireInt4(opts.version, 'version', 1)
        : (classVersion ?? (meta ? versionOf(meta) : null));
    const run = {
      kind,
      inputJson,
      idempotencyKey: key ?? null,
      maxAttempts,
      runAt,
      priority,
      event,
      concurrencyKey,
      tags,
      kindVersion,
      // A kind declared here with a limit is never handed to a worker (its claim takes the slots).
      handoff: !(meta?.concurrency || meta?.perKeyConcurrency || meta?.rateLimit),
    };

    if (meta?.debounce) return this.store.startDebounced(run, debounced(meta, input, key, opts.runAt));
    // A key taken by a run that retention deletes right then: the second insert gets it.
    for (let attempt = 0; ; attempt++) {
      const created = await this.store.insert(run);
      if (created) return { run: created, created: true };
      const existing = await this.store.holderOf(key!, inputJson);
      if (!existing && attempt === 0) continue;
      if (!existing) throw new Error(`idempotency key "${key}" conflicted but no run holds it`);
      if (existing.run.kind !== kind || !existing.sameInput) {
        throw new IdempotencyConflictError(key!, existing.run.id, existing.run.kind, kind);
      }
      return { run: existing.run, created: false };
    }
  }

  /**
   * A kind started by name, with no concurrency key, in a process that does not register it: does a
   * worker declare a per-key limit for it (`ai_limits`)? Then the run would escape that limit (no key, no
   * key scope). `unkeyedStarts: 'warn'` logs it once per kind; `'refuse'` throws
   * MissingConcurrencyKeyError and writes nothing. A read that fails is no answer under 'warn'.
   */
  private async checkKeyed(kind: string): Promise<void> {
    const known = this.keyedAt.get(kind);
    let keyed: boolean;
    if (known && Date.now() - known.at < KEYED_CACHE_MS) keyed = known.keyed;
    else {
      const read = this.presence.keyed(kind);
      keyed = this.options.unkeyedStarts === 'refuse' ? await read : await read.catch(() => false);
      this.keyedAt.set(kind, { keyed, at: Date.now() });
    }
    if (!keyed) return;
    if (this.options.unkeyedStarts === 'refuse') throw new MissingConcurrencyKeyError(kind);
    if (this.warnedKeyless.has(kind)) return;
    this.warnedKeyless.add(kind);
    this.logger.warn(
      `starting runs of kind '${kind}' by name with no concurrencyKey, in a process that does not register it: a worker declares a per-key limit for this kind, which these runs escape. Pass the class (runs.start(TheWorkflow, input)), or { concurrencyKey }; unkeyedStarts: 'refuse' makes such a start() throw`,
    );
  }

  /**
   * A kind started in a producer-only process (which runs no worker): is a live worker serving it
   * (`ai_workers`)? `'warn'`: asked at the first start of each kind, one warning if not. `'refuse'`: asked
   * at every start (a yes is kept SERVED_CACHE_MS), NoWorkerForKindError if not.
   */
  private async checkServed(kind: string, unregistered: boolean): Promise<void> {
    const first = !this.startedKinds.has(kind);
    this.startedKinds.add(kind);
    if (this.options.unservedKinds === 'refuse') {
      if (Date.now() - (this.servedAt.get(kind) ?? -Infinity) < SERVED_CACHE_MS) return;
      if (!(await this.presence.served(kind))) throw new NoWorkerForKindError(kind);
      this.servedAt.set(kind, Date.now());
      return;
    }
    if (!first) return;
    // 'warn' never keeps a run from starting: a presence read that fails is no answer, and no warning.
    if (await this.presence.served(kind).catch(() => true)) {
      if (unregistered)
        this.logger.debug(
          `starting runs of kind '${kind}', not registered in this producer-only process (worker.enabled: false); a live worker serves it`,
        );
    } else {
      this.logger.warn(
        `starting runs of kind '${kind}', which no live worker serves (none registers @DurableWorkflow('${kind}'), or they all stopped): its runs wait until one does. unservedKinds: 'refuse' makes start() refuse them`,
      );
    }
  }
}

/** How long a kind's answer to `checkKeyed` is kept (a worker may declare or drop its limit). */
const KEYED_CACHE_MS = 5000;

/** How long a live worker seen serving a kind spares `unservedKinds: 'refuse'` another look. */
const SERVED_CACHE_MS = 5000;

/** The kind a `@DurableWorkflow(kind)` class declares (`method`: the RunRepository call, for the error). */
export function workflowKind(workflow: WorkflowClass, method: string): string {
  const meta = workflowMeta(workflow);
  if (!meta?.kind) {
    throw new DurableUsageError(
      `RunRepository.${method}(${workflow.name || 'class'}, …): the class has no @DurableWorkflow(kind) decorator; decorate it or pass the kind as a string`,
    );
  }
  return meta.kind;
}

/** The `@DurableWorkflow` metadata of a class, if it has the decorator. */
const workflowMeta = (workflow: WorkflowClass): WorkflowMetadata | undefined =>
  Reflect.getMetadata(WORKFLOW_METADATA, workflow) as WorkflowMetadata | undefined;

/** A debounced kind's key and period; a start with an idempotency key or a runAt is refused. */
function debounced(
  meta: WorkflowMetadata,
  input: unknown,
  idempotencyKey: string | undefined,
  runAt: unknown,
): { key: string; periodMs: number } {
  const why = `cannot be given for kind "${meta.kind}": its starts are debounced (a burst becomes one run)`;
  if (idempotencyKey !== undefined && idempotencyKey !== null)
    throw new InvalidArgumentError('idempotencyKey', why);
  if (runAt !== undefined) throw new InvalidArgumentError('runAt', why);
  const { periodMs, key } = meta.debounce!;
  return { key: (key && keyFrom(key, input, meta.kind, 'debounce.key')) ?? '', periodMs };
}

/**
 * A kind as `start()` may store and log it: a non-empty string of at most MAX_KIND_LENGTH characters
 * with no control character (a newline in a kind would forge a log line). InvalidArgumentError (400)
 * otherwise, checked before anything is looked up, written or logged.
 */
export function requireKind(kind: unknown): string {
  return requireShortText(kind, 'kind');
}
