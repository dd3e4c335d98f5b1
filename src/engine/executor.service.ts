import { Inject, Injectable, Logger } from '@nestjs/common';
import { DURABLE_EXECUTION_OPTIONS } from '../durable-execution.constants';
import { DurableRegistry } from '../discovery/durable.registry';
import { LeaseLostError } from '../errors/lease-lost.error';
import { NonDeterminismError } from '../errors/non-determinism.error';
import { RunCancelledError } from '../errors/run-cancelled.error';
import type { ResolvedDurableOptions } from '../options/durable-execution-options.interface';
import { DurableObservers } from '../observability/durable-observers';
import type { RunAttemptOutcome } from '../observability/durable-observer.interface';
import { CheckpointService } from '../store/checkpoint.service';
import { ClaimedRun, FinishWrite, LeaseService } from '../store/lease.service';
import { RunWrites } from '../store/run-writes.service';
import { RunSuspended } from './run-suspended';
import { toStoredJson } from '../util/json';
import { ActiveRun } from './active-run';
import { isNonRetryable } from './retry';
import { serializeError } from './serialize-error';
import { redactErrorMessage } from '../options/redact';

const OUTCOMES: Record<FinishWrite['status'], RunAttemptOutcome> = {
  succeeded: 'succeeded',
  failed: 'failed',
  cancelled: 'cancelled',
  dead_lettered: 'dead_lettered',
  waiting: 'retry_scheduled',
};

/** Reasons of a park that waits for an operator (command-step.ts): approval, manual in-doubt. */
const OPERATOR_PARK = /^awaiting approval of |is in doubt: resolve it/;

/** How a log line names a run: id and kind, nothing of its data. */
function runLabel(run: ActiveRun): string {
  return `run ${run.runId} (kind '${run.kind}')`;
}

/**
 * Drives one claimed run to its next resting point: replays `run()` from the top (checkpoints read
 * in one query), executes new steps, then records the outcome with one fenced statement: succeeded,
 * failed, cancelled, dead-lettered, or back to `waiting` with backoff for a transient error.
 */
@Injectable()
export class Executor {
  private readonly logger = new Logger('DurableExecution');

  constructor(
    private readonly registry: DurableRegistry,
    private readonly checkpoints: CheckpointService,
    private readonly lease: LeaseService,
    private readonly writes: RunWrites,
    @Inject(DURABLE_EXECUTION_OPTIONS) private readonly options: ResolvedDurableOptions,
    private readonly observers: DurableObservers,
  ) {}

  /** Prepares the in-memory driver of a claimed run (one query for all its checkpoints and commands). */
  async prepare(claim: ClaimedRun, workerId: string): Promise<ActiveRun> {
    // A first claim has nothing recorded: skip the read (one statement less per new run).
    const { checkpoints, commands } =
      claim.epoch === 1
        ? { checkpoints: new Map(), commands: new Map() }
        : await this.checkpoints.loadForReplay(claim.id);
    const run = new ActiveRun(claim, workerId, checkpoints, commands, this.lease, this.writes, this.options);
    if (this.observers.active) run.observers = this.observers;
    return run;
  }

  /** Runs the workflow and settles the run. Never throws: every outcome is recorded or logged. */
  drive(run: ActiveRun): Promise<void> {
    if (!this.observers.active) return this.driveRun(run);
    const info = {
      runId: run.runId,
      kind: run.kind,
      epoch: run.epoch,
      attempt: run.attempt,
      workerId: run.workerId,
    };
    return this.observers.runAttempt(
      info,
      () => this.driveRun(run),
      () => run.outcome ?? 'unrecorded',
    );
  }

  private async driveRun(run: ActiveRun): Promise<void> {
    try {
      await this.driveAttempt(run);
    } finally {
      run.close();
    }
  }

  private async driveAttempt(run: ActiveRun): Promise<void> {
    const wf = this.registry.getWorkflow(run.kind);
    try {
      if (!wf) throw new Error(`no @DurableWorkflow('${run.kind}') on worker ${run.workerId}`);
      const output = await run.execute(() => wf.instance.run(run.claim.input, run.context));
      if (run.stopReason instanceof RunSuspended) return await this.unwindSuspended(run, run.stopReason);
      if (run.stopReason) throw run.stopReason;
      const outputJson = toStoredJson(
        output === undefined ? null : output,
        `output of run kind "${run.kind}"`,
        this.options.limits.maxOutputBytes,
      );
      await this.finish(run, { status: 'succeeded', outputJson, event: 'run.succeeded', payload: {} });
    } catch (err) {
      await this.settleFailure(run, run.stopReason ?? err);
    }
  }

  /** A parked run is already recorded; a run a drain stopped at a step boundary is released here. */
  private async unwindSuspended(run: ActiveRun, s: RunSuspended): Promise<void> {
    if (s.releaseOnUnwind) return this.release(run, true, s.reason);
    // Parked (already recorded), or released by the draining worker (which records it).
    run.outcome ??= s.reason.includes('drain') ? 'released' : 'parked';
    // Waits for an operator (approval, a manual in-doubt command) are worth a line; sleeps and signals not.
    if (OPERATOR_PARK.test(s.reason)) this.logger.log(`${runLabel(run)} parked for an operator: ${s.reason}`);
  }

  /** `: <message>` with `logRunData`, else nothing: a message can quote the run's input or output. */
  private detail(error: Record<string, unknown> | null | undefined): string {
    const message = error?.message;
    return this.options.logRunData && typeof message === 'string'
      ? `: ${redactErrorMessage(this.options.redact, message)}`
      : '';
  }

  private leaseLost(run: ActiveRun, err: LeaseLostError): void {
    this.logger.warn(
      `${runLabel(run)} lost its lease (epoch ${err.epoch}, during ${err.during}); another worker resumes it`,
    );
  }

  /**
   * Hands a run this worker drives back to `waiting` (fenced) so another worker resumes it at once:
   * a drain, not a failure (the claim's attempt is given back unless a step committed).
   */
  async release(run: ActiveRun, atStepBoundary: boolean, reason = 'drain'): Promise<void> {
    await this.finish(
      run,
      {
        status: 'waiting',
        attemptsDelta: run.progressed ? 0 : -1,
        event: 'run.released',
        payload: { reason, workerId: run.workerId, atStepBoundary },
      },
      'released',
    );
  }

  private async settleFailure(run: ActiveRun, err: unknown): Promise<void> {
    if (err instanceof RunSuspended) return this.unwindSuspended(run, err);
    if (err instanceof LeaseLostError) {
      run.outcome = err.during === 'drain' ? 'released' : 'lease_lost';
      this.leaseLost(run, err);
      return;
    }
    const error = serializeError(err);
    if (err instanceof RunCancelledError) {
      await this.finish(run, {
        status: 'cancelled',
        error,
        event: 'run.cancelled',
        payload: { by: 'worker' },
      });
      return;
    }
    if (isNonRetryable(err)) {
      const kind = err instanceof NonDeterminismError ? 'non_determinism' : 'non_retryable';
      await this.finish(run, {
        status: 'failed',
        error,
        event: 'run.failed',
        payload: { reason: kind, error: error.message },
      });
      return;
    }
    // Transient: the claim already counted one attempt unless a step committed (which reset attempts).
    const attempts = run.progressed ? 1 : run.claim.attempts;
    if (attempts >= run.claim.maxAttempts) {
      await this.finish(run, {
        status: 'dead_lettered',
        error,
        attemptsDelta: run.progressed ? 1 : 0,
        event: 'run.dead_lettered',
        payload: { reason: 'attempts_exhausted', attempts, error: error.message },
        parkedReason: `attempts exhausted (${attempts}/${run.claim.maxAttempts}): ${error.message}`,
      });
      return;
    }
    const r = this.options.reconciler;
    const delayMs =
      Math.min(r.backoffMaxMs, r.backoffBaseMs * 2 ** (attempts - 1)) * (0.8 + Math.random() * 0.4);
    await this.finish(run, {
      status: 'waiting',
      error,
      delayMs: Math.round(delayMs),
      attemptsDelta: run.progressed ? 1 : 0,
      event: 'run.retry_scheduled',
      payload: { attempts, delayMs: Math.round(delayMs), error: error.message },
    });
  }

  private async finish(run: ActiveRun, w: FinishWrite, outcome?: RunAttemptOutcome): Promise<void> {
    try {
      await this.lease.finish(run.fence, { ...w, records: [...(w.records ?? []), ...run.takePending()] });
      run.outcome = outcome ?? OUTCOMES[w.status];
      if (w.status === 'failed') this.logger.error(`${runLabel(run)} failed${this.detail(w.error)}`);
      else if (w.status === 'dead_lettered') {
        this.logger.error(
          `${runLabel(run)} dead-lettered after ${run.claim.maxAttempts} attempt(s)${this.detail(w.error)}; RunRepository.retry(id) resumes it`,
        );
      }
    } catch (err) {
      if (err instanceof LeaseLostError) {
        run.outcome = 'lease_lost';
        this.leaseLost(run, err);
      } else this.logger.error(`could not record ${w.event} for ${runLabel(run)}: ${(err as Error).message}`);
    }
  }
}
