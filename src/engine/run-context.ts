import type { WaitForSignalOptions } from '../interfaces/command.interface';
import type {
  ChildOptions,
  ChildRun,
  StartChildOptions,
  WaitForChildOptions,
} from '../interfaces/child.interface';
import type {
  RunCancelInfo,
  WorkflowClass,
  WorkflowInput,
  WorkflowOutput,
} from '../interfaces/run.interface';
import type {
  AnySignals,
  SignalMap,
  SignalName,
  SignalPayload,
  StorableAs,
  UntypedSignalName,
} from '../interfaces/stored-types.interface';
import { handed } from './handed';
import type { RunContextHost } from './run-context-host';
import { clockNow } from './test-clock';
import { uuidFromSeed } from '../util/uuid-from-seed';

export type { RunContextHost } from './run-context-host';

/**
 * What a workflow's `run(input, ctx)` receives, and what `currentRun()` returns inside a step.
 * Non-deterministic values come from here so that a resumed run sees the values it saw before.
 * `S` declares the workflow's signals once (`run(input, ctx: RunContext<{ approve: { by: string } }>)`):
 * `ctx.waitForSignal` and `RunRepository.signal(WorkflowClass, ...)` then accept only those names and
 * payloads. Without it, any name and an `unknown` payload.
 */
export class RunContext<S extends SignalMap = AnySignals> {
  /** @internal The engine creates the context of each run. */
  constructor(private readonly host: RunContextHost) {}

  /** Id of the run. */
  get runId(): string {
    return this.host.runId;
  }
  /** Workflow kind. */
  get kind(): string {
    return this.host.kind;
  }
  /** Fencing token of this claim; rises by one on every claim. */
  get epoch(): number {
    return this.host.epoch;
  }
  /** WAL timeline of this claim (a failover starts a new one): the fencing token is (timeline, epoch). */
  get timeline(): number {
    return this.host.timeline;
  }
  /** Claims of this run since it last made progress (1 on a first, clean claim). */
  get attempt(): number {
    return this.host.attempt;
  }
  /**
   * Fires when this worker loses the lease or the run is cancelled: pass it to HTTP clients. Inside a
   * `@DurableStep` body it is that attempt's signal: it fires at the step's `timeoutMs` too.
   */
  get signal(): AbortSignal {
    return this.host.signal;
  }

  /**
   * Throws `LeaseLostError` (and stops the run, as a lost lease does) unless this worker still knows
   * its lease to hold for the fenced transport's margin (`worker.wireMarginMs`). Synchronous: call it
   * right before a write the library cannot see (a native or in-process client, a client that writes
   * from another async context, such as a shared connection's offline queue), with no `await` between
   * the two: `currentRun()!.assertLease(); nativeClient.publish(message)`. Inside a command or step body
   * it is the check the transport makes at the socket (the call's gate); elsewhere, the run's lease.
   */
  assertLease(): void {
    this.host.lease.assertHeld('ctx.assertLease()');
  }

  /** The current time, recorded on first use and replayed after a resume (inside a step: the clock). */
  now(): Date {
    const iso = this.host.record(
      '$now',
      () => new Date(clockNow(this.host.runId)).toISOString(),
      () => new Date(clockNow(this.host.runId)).toISOString(),
    );
    return new Date(iso);
  }

  /** A random UUID, recorded like `now()`; inside a step derived from (run, step, call): same on retries. */
  uuid(): string {
    return this.host.record('$uuid', () => crypto.randomUUID(), uuidFromSeed);
  }

  /** A random number in [0, 1), recorded like `uuid()`. */
  random(): number {
    return this.host.record('$random', Math.random, (seed) => seed.readUIntBE(0, 6) / 2 ** 48);
  }

  /** Inside a step: records how far a long loop got (fenced); a resumed step reads it with `resumePoint()`. */
  progress(item: number, partial?: unknown): Promise<void> {
    return handed(this.host.progress(item, partial ?? null));
  }

  /** Durable sleep until now() + ms (database clock), holding no worker or connection. In the workflow body. */
  sleep(ms: number): Promise<void> {
    return handed(this.host.sleep(ms));
  }

  /**
   * Waits for `RunRepository.signal(runId, name, payload)` and returns the payload (one sent before is
   * not lost), holding no worker. `timeoutMs`: SignalTimeoutError once it passes (database clock, from
   * the first time this wait was reached). A typed context types the name and payload.
   */
  waitForSignal<K extends SignalName<S>>(
    name: K,
    options?: WaitForSignalOptions,
  ): Promise<SignalPayload<S, K>>;
  waitForSignal<T>(name: UntypedSignalName<S>, options?: WaitForSignalOptions): Promise<T>;
  waitForSignal(name: string, options: WaitForSignalOptions = {}): Promise<unknown> {
    return handed(this.host.waitForSignal(name, options));
  }

  /**
   * Starts a child run once (keyed by this run and this call's position) and waits for it durably,
   * holding no worker or slot: its output, or ChildRunError when it failed, was dead-lettered or
   * cancelled, or `timeoutMs` passed (then it is cancelled). Typed by the workflow class. Call it in
   * the workflow body; `Promise.all` over several fans out and replays in the same order.
   */
  child<W extends WorkflowClass>(
    workflow: W,
    input: StorableAs<WorkflowInput<W>>,
    options?: ChildOptions,
  ): Promise<WorkflowOutput<W>>;
  child<O = unknown>(kind: string, input: unknown, options?: ChildOptions): Promise<O>;
  child(target: string | WorkflowClass, input: unknown, options: ChildOptions = {}): Promise<unknown> {
    const { timeoutMs, ...start } = options ?? {};
    const waited = this.host
      .startChild(target, input, start)
      .then((c) => this.host.waitForChild(c, { timeoutMs }));
    return handed(waited);
  }

  /**
   * Starts a child run without waiting (recorded like `child`'s start): pass what it returns to
   * `waitForChild` later, or never (with `parentClose: 'abandon'` it outlives this run).
   */
  startChild<W extends WorkflowClass>(
    workflow: W,
    input: StorableAs<WorkflowInput<W>>,
    options?: StartChildOptions,
  ): Promise<ChildRun<WorkflowOutput<W>>>;
  startChild<O = unknown>(kind: string, input: unknown, options?: StartChildOptions): Promise<ChildRun<O>>;
  startChild(
    target: string | WorkflowClass,
    input: unknown,
    options: StartChildOptions = {},
  ): Promise<ChildRun> {
    return handed(this.host.startChild(target, input, options));
  }

  /** Waits durably for a child `startChild` returned: its output, or ChildRunError (see `child`). */
  waitForChild<O>(child: ChildRun<O>, options?: WaitForChildOptions): Promise<O> {
    return handed(this.host.waitForChild(child, options ?? {})) as Promise<O>;
  }

  /**
   * Changes a workflow under runs in flight: `if (ctx.patched('fraud-check')) await this.fraud.check(o)`.
   * True for a run that reaches this point first on the new code; false for one whose record passed
   * here before the change (it replays the old path). The first answer stands for the whole run (every
   * later call of `id`, in a loop too, returns the same) and is recorded as the patch's marker, at a
   * position of its own. Once `RunRepository.patchStatus(kind, id)` allows, use `deprecatePatch(id)`
   * (docs/EVOLVE.md).
   */
  patched(id: string): boolean {
    return this.host.patched(id);
  }

  /**
   * Where `patched(id)` was, once no run can take the old path: the new path always, and a run that
   * recorded the marker true still replays cleanly. Remove it when no open run holds the marker.
   */
  deprecatePatch(id: string): void {
    this.host.deprecatePatch(id);
  }

  /**
   * Adds tags to the run (a name given again takes the new value), to find it by what it turned out to
   * be about (`list({ tags })`): one fenced write. At most 16 per call. Call it in the workflow body.
   */
  setTags(tags: Record<string, string>): Promise<void> {
    return handed(this.host.setTags(tags));
  }

  /**
   * Appends `{ topic, data }` to the run's progress stream (`RunRepository.watch`, SSE), in order, in a
   * fenced write. In the workflow body it is recorded: a replay never writes it twice. In a step's body
   * the entry names the step's attempt; a step cut off and run again writes its own (see docs/STREAMING.md).
   */
  emit(topic: string, data?: unknown): Promise<void> {
    return handed(this.host.emit(topic, data));
  }

  /**
   * Starts this run again from the top with `input` and a fresh history, keeping its id (`result()`,
   * `watch()` and signals go on), tags and stream: `return ctx.continueAsNew(next)` for a chat agent
   * with thousands of turns. Waits for live calls first; later generations' keys name it (`:g<n>`).
   */
  continueAsNew(input: unknown): Promise<never> {
    return handed(this.host.continueAsNew(input));
  }

  /** Inside a step: the last `progress(item, partial)` recorded by an earlier attempt of this step. */
  resumePoint<T = unknown>(): { item: number; partial: T } | null {
    return this.host.resumePoint() as { item: number; partial: T } | null;
  }
}

/**
 * A workflow that cleans up after a cancel: when a cancel reaches its running code, `run()` stops
 * (every call it makes from then on throws RunCancelledError), and once its calls have settled the
 * engine calls `onCancel(input, ctx, cancel)`. Its steps and commands run and are recorded like
 * `run()`'s, in a position space of their own; a crash, drain or lost lease during the cleanup resumes
 * it on the next claim, replaying what it recorded. It may not wait (`sleep`, `waitForSignal`, an
 * approval): that ends the cleanup with a usage error. The run ends `cancelled` however `onCancel`
 * ends; its error, if it threw, is in the `run.cancelled` event (`cleanup: 'failed'`). A run
 * cancelled while `pending` or parked (`waiting`) ends at once, with no cleanup.
 */
export interface OnRunCancel<I = any> {
  onCancel(input: I, ctx: RunContext, cancel: RunCancelInfo): unknown;
}

/**
 * The signals a workflow class declares (the type argument of its `run()`'s context), or `AnySignals`
 * when its context is untyped.
 */
export type WorkflowSignals<W> = W extends new (...args: any[]) => {
  run(input: any, ctx: infer C, ...rest: any[]): unknown;
}
  ? C extends RunContext<infer S>
    ? S
    : AnySignals
  : AnySignals;
