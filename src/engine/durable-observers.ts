import { Injectable, Logger } from '@nestjs/common';
import type {
  DurableObserver,
  ReconcileOutcome,
  RunAttemptInfo,
  RunAttemptOutcome,
  StepInfo,
  StepOutcome,
  WorkerTickInfo,
} from '../interfaces/durable-observer.interface';

type Wrap<T> = (next: () => Promise<T>) => Promise<T>;

/**
 * The engine's instrumentation hub. The executor, worker and reconciler report to it; metrics and
 * tracing register observers on it. With no observer registered (`active` false) the engine skips
 * every call: no timing, no closure, and never an SQL statement of its own.
 * @example
 * ```ts
 * constructor(observers: DurableObservers) { observers.add({ stepEnded: (s, outcome) => log(s.name, outcome) }); }
 * ```
 */
@Injectable()
export class DurableObservers {
  private readonly logger = new Logger('DurableExecution');
  private list: DurableObserver[] = [];
  /** True while at least one observer is registered. */
  active = false;

  /** Registers an observer; returns the function that removes it. */
  add(observer: DurableObserver): () => void {
    this.list = [...this.list, observer];
    this.active = true;
    return () => {
      this.list = this.list.filter((o) => o !== observer);
      this.active = this.list.length > 0;
    };
  }

  /**
   * Drives one run attempt (`body`, which says how it ended) between `runAttemptStarted` and
   * `runAttemptEnded`.
   */
  async runAttempt(info: RunAttemptInfo, body: () => Promise<RunAttemptOutcome>): Promise<void> {
    const started = performance.now();
    let outcome: RunAttemptOutcome = 'unrecorded';
    this.emit((o) => o.runAttemptStarted?.(info));
    try {
      await this.compose(
        async () => {
          outcome = await body();
        },
        (o) => (o.wrapRunAttempt ? (next) => o.wrapRunAttempt!(info, next) : null),
      );
    } finally {
      const ms = performance.now() - started;
      this.emit((o) => o.runAttemptEnded?.(info, outcome, ms));
    }
  }

  /** Executes one new step or command (`body`), timed; replays never come here. */
  async step<T>(info: StepInfo, body: () => Promise<T>): Promise<T> {
    const started = performance.now();
    try {
      const out = await this.compose(body, (o) =>
        o.wrapStep ? (next: () => Promise<T>) => o.wrapStep!(info, next) : null,
      );
      const ms = performance.now() - started;
      this.emit((o) => o.stepEnded?.(info, 'committed', ms));
      return out;
    } catch (err) {
      const ms = performance.now() - started;
      const outcome: StepOutcome = stepOutcomeOf(err);
      this.emit((o) => o.stepEnded?.(info, outcome, ms, err));
      throw err;
    }
  }

  /** One claim round of a worker (also its liveness signal). */
  workerTicked(tick: WorkerTickInfo): void {
    this.emit((o) => o.workerTicked?.(tick));
  }

  /** One reconciler sweep that changed something. */
  reconciled(result: ReconcileOutcome): void {
    this.emit((o) => o.reconciled?.(result));
  }

  private compose<T>(body: () => Promise<T>, wrapOf: (o: DurableObserver) => Wrap<T> | null): Promise<T> {
    let next = body;
    for (const o of [...this.list].reverse()) {
      const wrap = wrapOf(o);
      if (wrap) {
        const inner = next;
        next = () => wrap(inner);
      }
    }
    return next();
  }

  /** An observer that throws is logged, never allowed to break a run. */
  private emit(call: (o: DurableObserver) => void): void {
    for (const o of this.list) {
      try {
        call(o);
      } catch (err) {
        this.logger.warn(`a durable observer failed: ${(err as Error).message}`);
      }
    }
  }
}

/** A step that parked the run (approval, sleep, signal wait) did not fail. */
function stepOutcomeOf(err: unknown): StepOutcome {
  return (err as Error | null)?.name === 'RunSuspended' ? 'parked' : 'failed';
}
