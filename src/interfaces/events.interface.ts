/**
 * The events the engine writes to `ai_events` (`RunRepository.events()` returns them as `RunEvent`),
 * with their payloads. docs/EVENTS.md describes each one. `events.interface.spec.ts` checks that every
 * event type written anywhere under src/ is listed here.
 *
 * Payloads pass the module's `redact` hook before they are stored, except those built inside SQL
 * (`run.claimed`, `run.limited`, `run.debounced`, `run.reconciled`, `run.pruned`, `signal.sent`, `signal.received`, `signal.timed_out`,
 * `child.started`, `child.ended`, and a child's `run.cancel_requested`/`run.cancelled` from its parent),
 * so a `redact` that drops fields makes them optional in what you read back.
 */

import type { By, CommandRef, ModelUsagePayload, NotSent } from './event-parts.interface';

export type { By, CommandRef, ModelUsagePayload, NotSent } from './event-parts.interface';

/**
 * Payload of each event type, by type. `availableAt` is the due time PostgreSQL recorded (ISO text, or
 * `infinity` for a park that waits for an operator or a signal without a timeout).
 */
export interface DurableEventPayloads {
  /** `RunRepository.start()` stored a new run (not written when the idempotency key already had one). */
  'run.created': {
    kind: string;
    idempotencyKey: string | null;
    traceparent?: string;
    /** A run a `@DurableCron` tick started: the schedule's name and the tick (ISO). */
    schedule?: string;
    scheduledAt?: string;
    /** A child run (`ctx.startChild`): its parent run's id. */
    parent?: string;
    /** A fork (`RunRepository.fork`): the original's id, the first step it ran itself, checkpoints copied. */
    forkedFrom?: string;
    fromStep?: number;
    inherited?: number;
    /** The inherited step whose result the fork was given instead (`editResult`). */
    edited?: number;
  };
  /** A worker claimed the run; the event's epoch is the new one. `attempt` counts claims without progress. */
  'run.claimed': {
    workerId: string;
    attempt: number;
    /** The server's WAL timeline at the claim: with the epoch, the claim's fencing token (absent before). */
    timeline?: number;
    /**
     * The concurrency slots the claim took, when the kind has a limit: `[scope, n]` each, the scope
     * `[kind]` or `[kind, key]`. The statement that takes the run out of `running` frees them.
     */
    slots?: Array<[string[], number]>;
    /**
     * The rate token the run's first claim took, when its kind has a `rateLimit`: `[scope, n]`, the
     * scope `{ rate: [kind] }` or `{ rate: [kind, key] }`. Free again a period later.
     */
    rateToken?: [{ rate: string[] }, number];
    /** The run's start handed it to this worker (hand-off): written by the start, no claim of its own. */
    handoff?: true;
  };
  /**
   * A claim found the run due but a concurrency limit full (`scope`: `[kind]` or `[kind, key]`), or no
   * rate token free (`{ rate: [kind] }`, `{ rate: [kind, key] }`): the run stays queued, out of the
   * claim index, until a slot of that scope frees or a token is free again.
   */
  'run.limited': { scope: string[] | { rate: string[] } };
  /**
   * A start of a debounced kind found this run not begun yet: its input is now that start's, and it is
   * due at `availableAt`.
   */
  'run.debounced': { availableAt: string };
  /** A `tool` step started (cursor `started`). */
  'step.started': { step: number; name: string };
  /** A `model` step started (cursor `started`). */
  'model.call_started': { step: number; name: string };
  /**
   * A step failed for good in a claim (retries spent, or an error not retried) and the workflow went
   * on past that failure: recorded with the next write, so a replay throws the same error there.
   */
  'step.failed': { step: number; name: string; error: string };
  /** A step's output committed with its checkpoint. */
  'run.checkpoint_saved': { step: number; name: string; kind: 'model' | 'tool' } & ModelUsagePayload;
  /** A command was reserved (row `pending`) just before its dispatch. */
  'tool.command_reserved': { key: string; name: string; step: number };
  /** A command succeeded; `recovered` when an earlier attempt's stored success was recorded on replay. */
  'tool.command_succeeded': CommandRef & { recovered?: true };
  /** A command failed permanently; `error` when the dispatch threw (absent when replayed from the row). */
  'tool.command_failed': CommandRef & { error?: string };
  /**
   * A dispatch ended with an error that does not say whether the target acted (not a NonRetryableError
   * nor one the command declares definite): the command is in doubt until its policy settles it.
   */
  'tool.command_in_doubt': { key: string; name: string; step: number; error: string };
  /** A command rejected by an operator was recorded as the step's outcome. */
  'tool.command_rejected': CommandRef;
  /** The run parked on a command whose outcome a crash hid (`inDoubt: 'manual'`). */
  'command.in_doubt': { key: string; name: string; step: number; availableAt: string };
  /** The run parked on a command that needs an operator's approval. */
  'command.approval_requested': { key: string; name: string; step: number; availableAt: string };
  /** An operator approved a command. */
  'command.approved': { key: string; by: By; note: string | null; outcome: 'approved' };
  /** An operator rejected a command. */
  'command.rejected': { key: string; by: By; note: string | null; outcome: 'rejected' };
  /**
   * A command in doubt was settled: by the worker asking the target (`{ key, name, step, by: 'lookup', found: true }`),
   * or by an operator (`{ key, by, note, outcome }`, outcome `pending` meaning "dispatch once more").
   */
  'command.resolved':
    | (CommandRef & { by: 'lookup'; found: true })
    | { key: string; by: By; note: string | null; outcome: 'succeeded' | 'failed' | 'pending' };
  /**
   * A step's call found its model budget's window full: the run parked until `availableAt`, when the
   * window allows it (`waitMs` after); the step runs again then, and is charged again.
   */
  'model.budget_wait': { step: number; name: string; budget: string; waitMs: number; availableAt: string };
  /** `ctx.sleep(ms)` parked the run until `availableAt`. */
  'run.sleeping': { step: number; ms: number; availableAt: string };
  /** `ctx.waitForSignal(name)` parked the run (`availableAt`: the timeout, `infinity` without one). */
  'run.waiting_for_signal': { name: string; timeoutMs: number | null; availableAt: string };
  /** A signal was sent to the run (`RunRepository.signal()`). */
  'signal.sent': { name: string; by?: By };
  /** `ctx.waitForSignal(name)` consumed a signal. */
  'signal.received': { name: string; step: number };
  /** `ctx.waitForSignal(name)` timed out. */
  'signal.timed_out': { name: string; step: number };
  /** `ctx.continueAsNew`: generation `generation` began; the last one's checkpoints/commands deleted. */
  'run.continued_as_new': { generation: number; checkpoints: number; commands: number };
  /** `ctx.startChild` / `ctx.child` started child run `child` (of `kind`) at step `step`. */
  'child.started': { step: number; child: string; kind: string };
  /** A child run of this run ended (`status`); its end is stored for this run's wait. */
  'child.ended': {
    child: string;
    kind: string;
    status: 'succeeded' | 'failed' | 'cancelled' | 'dead_lettered';
  };
  /**
   * The worker handed the run back to `waiting`, due at once (a drain, or a command settled
   * meanwhile); with `callInFlight` (a drain whose grace a call outlived) due when the lease ends.
   */
  'run.released': {
    reason: string;
    workerId: string;
    atStepBoundary: boolean;
    callInFlight?: boolean;
  } & NotSent;
  /** A transient failure: the run is due again after `delayMs`. */
  'run.retry_scheduled': { attempts: number; delayMs: number; error: string } & NotSent;
  /** `run()` returned; the output is stored on the run. */
  'run.succeeded': NotSent;
  /** A non-retryable error, a misuse (`usage`), or an uncaught outcome of the record (`recorded`). */
  'run.failed': { reason: 'non_retryable' | 'usage' | 'recorded'; error: string } & NotSent;
  /**
   * The run's replay diverged from its record (non-determinism): held with no due time and its error
   * kept, until a fixed deploy runs and an operator retries it (`RunRepository.retry`).
   */
  'run.held': { reason: 'non_determinism'; error: string } & NotSent;
  /** Claims without progress reached `maxAttempts`. */
  'run.dead_lettered': { reason: 'attempts_exhausted'; attempts: number; error: string } & NotSent;
  /** A cancel was requested for a running run; it stops at its next step boundary or heartbeat. */
  'run.cancel_requested': { reason: string | null; by?: By; parent?: string };
  /**
   * The run was cancelled: at once when not running, else by its worker (`{ by: 'worker' }`; with
   * `cleanup` when its workflow has `onCancel`: `done`, or `failed` and the error it ended with).
   */
  'run.cancelled':
    | { reason: string | null; by?: By; parent?: string; fork?: string }
    | ({ by: 'worker'; cleanup?: 'done' | 'failed'; cleanupError?: string } & NotSent);
  /**
   * `RunRepository.fork` started run `fork` from this run's record before `fromStep`; `original` says
   * whether this run was left going or cancelled in the same statement (then `run.cancelled` follows).
   */
  'run.forked': { fork: string; fromStep: number; original: 'leave' | 'cancel'; by?: By };
  /** `RunRepository.fork` with `inPlace`: the run went back to `fromStep` under `generation`, `archived` checkpoints set aside. */
  'run.rewound': { fromStep: number; generation: number; archived: number; edited?: number; by?: By };
  /** A cancel reached the running workflow and its `onCancel` cleanup begins (once per run). */
  'run.cleanup_started': Record<never, never>;
  /** A failed or dead-lettered run was put back to `pending`. */
  'run.retried': { by: By | null };
  /** The reconciler found the run's lease expired and made it due again (or dead-lettered it). */
  'run.reconciled': {
    /** `lease_expired` (the reconciler), or `worker_gone` (`LeaseService.releaseWorker`). */
    reason: 'lease_expired' | 'worker_gone';
    previousWorker: string | null;
    outcome: 'waiting' | 'dead_lettered';
    attempts: number;
    availableAt: string;
    /** Idempotency keys of the commands that were `pending` and are now `in_doubt`. */
    inDoubt: string[];
    /** A start had handed it to that worker, which wrote nothing for it: the attempt is given back. */
    handoff?: true;
  };
  /** Retention pruned the run's history; this event is what is left of its trail. */
  'run.pruned': { by: 'retention'; checkpoints: number; events: number; finishedBefore: string };
}

/** Every event type the engine writes to `ai_events`. */
export type DurableEventType = keyof DurableEventPayloads;

/** Every event type once (a Record, so the compiler refuses a missing or unknown one). */
const EVENT_TYPES: Record<DurableEventType, true> = {
  'run.created': true,
  'run.claimed': true,
  'run.limited': true,
  'run.debounced': true,
  'step.started': true,
  'model.call_started': true,
  'run.checkpoint_saved': true,
  'step.failed': true,
  'tool.command_reserved': true,
  'tool.command_succeeded': true,
  'tool.command_failed': true,
  'tool.command_in_doubt': true,
  'tool.command_rejected': true,
  'command.in_doubt': true,
  'command.approval_requested': true,
  'command.approved': true,
  'command.rejected': true,
  'command.resolved': true,
  'model.budget_wait': true,
  'run.sleeping': true,
  'run.waiting_for_signal': true,
  'signal.sent': true,
  'signal.received': true,
  'signal.timed_out': true,
  'child.started': true,
  'child.ended': true,
  'run.continued_as_new': true,
  'run.released': true,
  'run.retry_scheduled': true,
  'run.succeeded': true,
  'run.failed': true,
  'run.held': true,
  'run.dead_lettered': true,
  'run.cancel_requested': true,
  'run.cancelled': true,
  'run.forked': true,
  'run.rewound': true,
  'run.cleanup_started': true,
  'run.retried': true,
  'run.reconciled': true,
  'run.pruned': true,
};

/** Every event type, as a list (docs, filters, exhaustiveness checks). */
export const DURABLE_EVENT_TYPES = Object.freeze(Object.keys(EVENT_TYPES) as DurableEventType[]);

/** A stored event narrowed by its type: `if (isDurableEvent(e, 'run.claimed')) e.payload.workerId`. */
export function isDurableEvent<T extends DurableEventType>(
  event: { type: string; payload: unknown },
  type: T,
): event is { type: T; payload: DurableEventPayloads[T] } {
  return event.type === type;
}
