import type { DurableEventPayloads, DurableEventType } from './events.interface';

/** Every key a payload of each event type may hold (of any of its shapes). */
type PayloadKeys<T> = T extends unknown ? keyof T & string : never;

/**
 * The keys each event type's payload may hold, at run time (the payload types above are the compiler's):
 * the compiler refuses a key here that the type lacks, and a key of the type missing here. A test
 * compares the payloads stored on real runs with it, another test compares it with docs/EVENTS.md.
 */
export const DURABLE_EVENT_PAYLOAD_KEYS = {
  'run.created': [
    'kind',
    'idempotencyKey',
    'traceparent',
    'schedule',
    'scheduledAt',
    'parent',
    'forkedFrom',
    'fromStep',
    'inherited',
    'edited',
  ],
  'run.claimed': ['workerId', 'attempt', 'timeline', 'slots', 'rateToken', 'handoff'],
  'run.limited': ['scope'],
  'run.debounced': ['availableAt'],
  'step.started': ['step', 'name'],
  'model.call_started': ['step', 'name'],
  'step.failed': ['step', 'name', 'error'],
  'run.checkpoint_saved': ['step', 'name', 'kind', 'usage', 'requestId'],
  'tool.command_reserved': ['key', 'name', 'step'],
  'tool.command_succeeded': ['key', 'name', 'step', 'recovered'],
  'tool.command_failed': ['key', 'name', 'step', 'error'],
  'tool.command_in_doubt': ['key', 'name', 'step', 'error'],
  'tool.command_rejected': ['key', 'name', 'step'],
  'command.in_doubt': ['key', 'name', 'step', 'availableAt'],
  'command.approval_requested': ['key', 'name', 'step', 'availableAt'],
  'command.approved': ['key', 'by', 'note', 'outcome'],
  'command.rejected': ['key', 'by', 'note', 'outcome'],
  'command.resolved': ['key', 'name', 'step', 'by', 'note', 'outcome', 'found'],
  'model.budget_wait': ['step', 'name', 'budget', 'waitMs', 'availableAt'],
  'run.sleeping': ['step', 'ms', 'availableAt'],
  'run.waiting_for_signal': ['name', 'timeoutMs', 'availableAt'],
  'signal.sent': ['name', 'by'],
  'signal.received': ['name', 'step'],
  'signal.timed_out': ['name', 'step'],
  'child.started': ['step', 'child', 'kind'],
  'run.continued_as_new': ['generation', 'checkpoints', 'commands'],
  'child.ended': ['child', 'kind', 'status'],
  'run.released': ['reason', 'workerId', 'atStepBoundary', 'callInFlight', 'notSent'],
  'run.retry_scheduled': ['attempts', 'delayMs', 'error', 'notSent'],
  'run.succeeded': ['notSent'],
  'run.failed': ['reason', 'error', 'notSent'],
  'run.held': ['reason', 'error', 'notSent'],
  'run.dead_lettered': ['reason', 'attempts', 'error', 'notSent'],
  'run.cancel_requested': ['reason', 'by', 'parent'],
  'run.cancelled': ['reason', 'by', 'cleanup', 'cleanupError', 'notSent', 'parent', 'fork'],
  'run.forked': ['fork', 'fromStep', 'original', 'by'],
  'run.rewound': ['fromStep', 'generation', 'archived', 'edited', 'by'],
  'run.cleanup_started': [],
  'run.retried': ['by'],
  'run.reconciled': ['reason', 'previousWorker', 'outcome', 'attempts', 'availableAt', 'inDoubt', 'handoff'],
  'run.pruned': ['by', 'checkpoints', 'events', 'finishedBefore'],
} as const satisfies { [K in DurableEventType]: ReadonlyArray<PayloadKeys<DurableEventPayloads[K]>> };

/** A key of an event type's payload type that DURABLE_EVENT_PAYLOAD_KEYS does not list (none: compiles). */
type UnlistedKey = {
  [K in DurableEventType]: Exclude<
    PayloadKeys<DurableEventPayloads[K]>,
    (typeof DURABLE_EVENT_PAYLOAD_KEYS)[K][number]
  >;
}[DurableEventType];
const everyKeyListed: [UnlistedKey] extends [never] ? true : UnlistedKey = true;
void everyKeyListed;
