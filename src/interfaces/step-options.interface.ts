import type { RetryPolicy } from '../options/durable-execution-options.interface';

/** What a step does, which decides how a crash inside it is recorded. */
export type StepKind = 'model' | 'tool' | 'compute';

/** Options of `@DurableStep`. */
export interface DurableStepOptions {
  /** Stable name recorded with the checkpoint. Default `ClassName.methodName`. */
  name?: string;
  /**
   * `model` and `tool` steps mark the cursor `started` (fenced) before running, so a crash mid-step is
   * visible as such; `compute` steps go straight to the commit (one round trip). Default `compute`.
   */
  kind?: StepKind;
  /**
   * Retry policy, merged over the module's `defaultRetry`. `maxAttempts` counts the body's failed
   * attempts across claims (`RunCursor.failures`): a worker killed between two attempts leaves the next
   * claim only those left. An engine stop (lost lease, cancel, drain) is not an attempt.
   */
  retry?: RetryPolicy;
  /**
   * Give up on an attempt that runs longer than this: its `ctx.signal` (the attempt's, inside the body)
   * fires with `StepTimeoutError`, the engine stops waiting and retries or fails the step as `retry`
   * says. A body that ignores the signal is abandoned after a grace of 5 s (the next attempt starts once it settled, or then): its
   * late result is dropped, and its requests and its calls on the run (`ctx.progress`, `ctx.emit`) are
   * refused. Default: the module's `defaultTimeoutMs` (10 minutes); 0: none.
   */
  timeoutMs?: number;
  /**
   * The model budget it draws on (a name in the module's `budgets`): each attempt is admitted only
   * when the budget's window allows it, else the run parks until it does; its `usage` is charged after.
   */
  budget?: string;
}

/** Options of `@DurableWorkflow`. */
export interface DurableWorkflowOptions {
  /**
   * The version of the kind this class runs (an integer from 1; default 1). A run is pinned to one
   * version: `start()` pins it to the newest version the starting process registers (or the version
   * it names), a run started where the kind is not registered is pinned by its first claim. A worker
   * claims only runs of the versions it registers, so a changed workflow is a new class with a higher
   * version, and the old class stays registered (or its workers stay up) until no run holds it
   * (`RunRepository.versions()`). Kind-wide options (limits, keys, debounce, schedules) are read from the
   * newest version a process registers. See docs/EVOLVE.md.
   */
  version?: number;
  /** `max_attempts` of new runs of this kind (claims without progress before dead-letter). */
  maxAttempts?: number;
  /**
   * At most this many runs of the kind are running at once, across every worker process (fleet-wide,
   * enforced in the claim). A run parked on a signal or a sleep holds no slot (unless
   * `holdSlotWhileWaiting`). Over the limit, a due run stays queued (`pending`/`waiting`, `limitedBy`
   * set) until a slot frees. See docs/FLOW-CONTROL.md.
   */
  concurrency?: number;
  /**
   * The key of a run for `perKeyConcurrency` (a tenant, a user), computed from its input when it is
   * started: a string or a number; null or undefined: the run has no key and no per-key limit.
   */
  concurrencyKey?: (input: any) => string | number | null | undefined;
  /** At most this many runs of one key are running at once, fleet-wide (1: one at a time per key). */
  perKeyConcurrency?: number;
  /**
   * A run keeps its `concurrency` / `perKeyConcurrency` slots while it waits (a sleep, a signal, an
   * approval, a command in doubt, a model budget), so a run that began is never queued behind runs
   * that had not: at most the limit have begun and not ended. Default false: a waiting run holds no
   * slot. A wait for a child run, a hold for non-determinism and a retry's backoff free the slots
   * whatever this says (the child may need them; an operator may take days). See docs/FLOW-CONTROL.md.
   */
  holdSlotWhileWaiting?: boolean;
  /**
   * At most `limit` runs of the kind (with `perKey`: of one `concurrencyKey`) begin in any `periodMs`,
   * fleet-wide. A run begins at its first claim; later claims (a resume, a retry) do not count. Over
   * the limit, a due run waits (`limitedBy` set) until a begin leaves the window: `start()` is never
   * refused. See docs/FLOW-CONTROL.md.
   */
  rateLimit?: { limit: number; periodMs: number; perKey?: boolean };
  /**
   * A burst of starts becomes one run: a start while a run of the kind (with `key`: of the same key) has
   * not begun replaces that run's input with its own and moves it `periodMs` later; the run begins once
   * `periodMs` passed with no new start, with the last input. Applies to `start()` in processes that
   * register the workflow; refuses `idempotencyKey` and `runAt`. See docs/FLOW-CONTROL.md.
   */
  debounce?: { periodMs: number; key?: (input: any) => string | number | null | undefined };
}

/** Options of `@DurableCron`. */
export interface DurableCronOptions {
  /** The schedule's name, unique in the database (default: the workflow's kind). */
  name?: string;
  /** IANA time zone the cron expression is read in (default `'UTC'`). */
  timezone?: string;
  /** Input of every run (a JSON object); the run also gets `schedule` and `scheduledAt`. */
  input?: Record<string, unknown>;
  /**
   * Ticks missed while no process fired them (every pod down): `'latest'` (default) starts one run,
   * for the latest missed tick; `'all'` one run per missed tick (at most 100 at once); `'skip'` none
   * (a tick fires only within a minute after it is due). Missed ticks belong to the schedule's name: a
   * schedule renamed in code starts afresh from its next tick, and the old name's are dropped.
   */
  catchUp?: 'latest' | 'all' | 'skip';
  /**
   * A tick whose schedule's previous run has not ended: `'allow'` (default) starts it, `'skip'` does not,
   * `'queue'` starts it once the previous run has ended (ticks wait their turn, one run at a time).
   */
  overlap?: 'allow' | 'skip' | 'queue';
  /**
   * The key of every run it starts, for its kind's `perKeyConcurrency` / `rateLimit.perKey`. Default: the
   * workflow's `concurrencyKey` of the schedule's input (with `schedule`), when the process that declares
   * or creates the schedule registers the workflow; else none.
   */
  concurrencyKey?: string;
}

/** A schedule as `@DurableCron` records it on the class. @internal */
export interface CronMetadata extends Required<
  Omit<DurableCronOptions, 'name' | 'input' | 'concurrencyKey'>
> {
  name?: string;
  concurrencyKey?: string;
  input: Record<string, unknown>;
  cron: string;
}

/** Metadata recorded by `@DurableStep`. @internal */
export interface StepMetadata {
  name: string;
  kind: StepKind;
  retry?: RetryPolicy;
  timeoutMs?: number;
  budget?: string;
  /** `Class.method`, for error messages. */
  declaredAt: string;
}

/** Metadata recorded by `@DurableWorkflow`. @internal */
export interface WorkflowMetadata extends DurableWorkflowOptions {
  kind: string;
}
