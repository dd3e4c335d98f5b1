import { InvalidArgumentError } from '../errors/invalid-argument.error';
import { Injectable } from '@nestjs/common';
import { ResultTimeoutError } from '../errors/result-timeout.error';
import { RunFailedError } from '../errors/run-failed.error';
import { RunNotFoundError } from '../errors/run-not-found.error';
import { RunEndListener } from '../store/run-end-listener';
import { RunOutcome, RunReadStore } from '../store/run-reads.store';
import { MAX_TIMER_MS } from '../util/timers';
import { requireUuid } from '../util/uuid';

/**
 * `started` (a run `start` or `fork` returned) with a `result(opts)` that waits for its run's output
 * (`RunResultWaiter.wait`), not enumerable: the object still serialises as it did. @internal
 */
export function withResult<T extends { run: { id: string } }>(started: T, results: RunResultWaiter): T {
  const result = (o?: { timeoutMs?: number }) => results.wait(started.run.id, o?.timeoutMs);
  return Object.defineProperty(started, 'result', { value: result, enumerable: false });
}

/**
 * Waits for runs to end through NOTIFY on `durable_execution_done`: one LISTEN connection per process,
 * opened on the first wait. After a reconnect every waiter re-checks (notifications sent while the
 * connection was away are lost). @internal
 */
@Injectable()
export class RunResultWaiter {
  private readonly waiters = new Map<string, Set<() => void>>();

  constructor(
    private readonly runEnds: RunEndListener,
    private readonly reads: RunReadStore,
  ) {}

  /**
   * The output of run `id` once it has ended: RunFailedError when it failed, was dead-lettered or
   * cancelled, ResultTimeoutError after `timeoutMs` (default 30 s; the run goes on). Arguments are
   * checked first (InvalidArgumentError).
   */
  async wait<O>(id: string, timeoutMs = 30_000, kind: string | null = null): Promise<O> {
    requireUuid(id, 'id');
    if (!Number.isFinite(timeoutMs) || timeoutMs < 0)
      throw new InvalidArgumentError('timeoutMs', `must be a finite number >= 0, got ${timeoutMs}`);
    await this.runEnds.listen((runId) => this.wake(runId));
    const deadline = Date.now() + timeoutMs;
    let row = await this.awaitable(id);
    if (kind !== null && row.kind !== kind)
      throw new InvalidArgumentError('id', `names a run of kind '${row.kind}', not '${kind}'`);
    while (!['succeeded', 'failed', 'dead_lettered', 'cancelled'].includes(row.status)) {
      const left = deadline - Date.now();
      if (left <= 0) throw new ResultTimeoutError(id, timeoutMs, row.status);
      await this.next(id, left);
      row = await this.awaitable(id);
    }
    if (row.status !== 'succeeded')
      throw new RunFailedError(id, row.status as 'failed' | 'dead_lettered' | 'cancelled', row.error);
    return row.output as O;
  }

  /** Marks the run to be announced when it ends (once), then reads it in a fresh snapshot. */
  private async awaitable(id: string): Promise<RunOutcome> {
    const outcome = await this.reads.awaitOutcome(id);
    if (!outcome) throw new RunNotFoundError(id);
    return outcome;
  }

  /** Resolves when `runId` is announced (or the connection came back), or after `ms`. */
  private next(runId: string, ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const set = this.waiters.get(runId) ?? new Set();
      this.waiters.set(runId, set);
      const done = () => {
        clearTimeout(timer);
        set.delete(done);
        if (!set.size) this.waiters.delete(runId);
        resolve();
      };
      // Clamped: a longer wait loops (wait() re-checks its deadline), never fires at once.
      const timer = setTimeout(done, Math.min(ms, MAX_TIMER_MS));
      set.add(done);
    });
  }

  private wake(runId: string | undefined): void {
    const targets = runId ? [this.waiters.get(runId)] : [...this.waiters.values()];
    for (const set of targets) for (const done of [...(set ?? [])]) done();
  }
}
