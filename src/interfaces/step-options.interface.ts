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
  /** Retry policy inside one claim; merged over the module's `defaultRetry`. */
  retry?: RetryPolicy;
  /** Abort the step (and retry it) when it runs longer than this. */
  timeoutMs?: number;
}

/** Options of `@DurableWorkflow`. */
export interface DurableWorkflowOptions {
  /** `max_attempts` of new runs of this kind (claims without progress before dead-letter). */
  maxAttempts?: number;
  /**
   * At most this many runs of the kind are running at once, across every worker process (fleet-wide,
   * enforced in the claim). A run parked on a signal or a sleep holds no slot. Over the limit, a due
   * run stays queued (`pending`/`waiting`, `limitedBy` set) until a slot frees. See docs/FLOW-CONTROL.md.
   */
  concurrency?: number;
  /**
   * The key of a run for `perKeyConcurrency` (a tenant, a user), computed from its input when it is
   * started: a string or a number; null or undefined: the run has no key and no per-key limit.
   */
  concurrencyKey?: (input: any) => string | number | null | undefined;
  /** At most this many runs of one key are running at once, fleet-wide (1: one at a time per key). */
  perKeyConcurrency?: number;
}

/** Metadata recorded by `@DurableStep`. @internal */
export interface StepMetadata {
  name: string;
  kind: StepKind;
  retry?: RetryPolicy;
  timeoutMs?: number;
  /** `Class.method`, for error messages. */
  declaredAt: string;
}

/** Metadata recorded by `@DurableWorkflow`. @internal */
export interface WorkflowMetadata extends DurableWorkflowOptions {
  kind: string;
}
