import { DurableExecutionError } from './durable-execution.error';

/**
 * `start()` of a kind by name with no `concurrencyKey`, in a process that does not register the kind,
 * with `unkeyedStarts: 'refuse'`, when a worker declares a per-key limit for that kind (`perKeyConcurrency`
 * or `rateLimit.perKey`): the run would escape its key's limit. Nothing was written.
 */
export class MissingConcurrencyKeyError extends DurableExecutionError {
  declare readonly code: 'DURABLE_MISSING_CONCURRENCY_KEY';
  constructor(public readonly kind: string) {
    const k = JSON.stringify(kind.slice(0, 80));
    super(
      'DURABLE_MISSING_CONCURRENCY_KEY',
      `Kind ${k} is limited per key, and this process neither registers it nor was given a key: the run was not started. ` +
        `Pass the @DurableWorkflow class (runs.start(TheWorkflow, input) applies its key function) or { concurrencyKey }, ` +
        `or set unkeyedStarts: 'warn' to start it unlimited with a warning.`,
    );
  }
}
