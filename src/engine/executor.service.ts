import { Inject, Injectable, Logger } from '@nestjs/common';
import { DURABLE_EXECUTION_OPTIONS } from '../durable-execution.constants';
import { DurableRegistry } from './durable.registry';
import { LeaseLostError } from '../errors/lease-lost.error';
import { NonDeterminismError } from '../errors/non-determinism.error';
import { RunCancelledError } from '../errors/run-cancelled.error';
import type { ResolvedDurableOptions } from '../options/durable-execution-options.interface';
import { DurableObservers } from './durable-observers';
import type { RunAttemptOutcome } from '../interfaces/durable-observer.interface';
import { redactErrorMessage } from '../options/redact';
import type { ClaimedRun } from '../store/run-state/claim-runs';
import type { FinishWrite } from '../store/run-state/finish-run';
import { RunStateStore } from '../store/run-state/run-state.store';
import { toStoredJson } from '../util/json';
import { ActiveRun } from './active-run';
import { isNonRetryable } from './retry';
import type { RunStop } from './run-stop';
import { serializeError } from './serialize-error';

const OUTCOMES: Record<FinishWrite['status'], RunAttemptOutcome> = {
  succeeded: 'succeeded',
  failed: 'failed',
  cancelled: 'cancelled',
  dead_lettered: 'dead_lettered',
  waiting: 'retry_scheduled',
};

/** How a log line names a run: id and kind, nothing of its data. */
function runLabel(run: ActiveRun): string {
  return `run ${run.runId} (kind '${run.kind}')`;
}

/**
 * Drives one claimed run to its next resting point: replays `run()` from the top (checkpoints read
 * in one query), executes new steps, then records the outcome with one fenced statement: succeeded,
 * failed, cancelled, dead-lettered, or back to `waiting` with backoff for a transient error. A run
 * that stopped early (RunStop: drain, park, cancel, lease lost, …) is settled by its stop.
 */
@Injectable()
export class Executor {
  private readonly logger = new Logger('DurableExecution');

  constructor(
    private readonly registry: DurableRegistry,
    private readonly store: RunStateStore,
    @Inject(DURABLE_EXECUTION_OPTIONS) private readonly options: ResolvedDurableOptions,
    private readonly observers: DurableObservers,
  ) {}

  /** Prepares the in-memory driver of a claimed run (one query for all its checkpoints and commands). */
  async prepare(claim: ClaimedRun, workerId: string): Promise<ActiveRun> {
    // A first claim has nothing recorded: skip the read (one statement less per new run).
    const { checkpoints, commands } =
      claim.epoch === 1
        ? { checkpoints: new Map(), commands: new Map() }
        : await this.store.loadForReplay(claim.id);
    const run = new ActiveRun(claim, workerId, checkpoints, commands, this.store, this.options);
    if (this.observers.active) run.observers = this.observers;
    return run;
  }

  /** Runs the workflow and settles the run. Never throws: every outcome is recorded or logged. */
  async drive(run: ActiveRun): Promise<void> {
    if (!this.observers.active) {
      await this.attempt(run);
      return;
    }
    const info = {
      runId: run.runId,
      kind: run.kind,
      epoch: run.epoch,
      attempt: run.attempt,
      workerId: run.workerId,
    };
    let outcome: RunAttemptOutcome = 'unrecorded';
    await this.observers.runAttempt(
      info,
      async () => {
        outcome = await this.attempt(run);
      },
      () => outcome,
    );
  }

  /** One attempt: the workflow from the top, then the run settled by how it ended. */
  private async attempt(run: ActiveRun): Promise<RunAttemptOutcome> {
    try {
      const wf = this.registry.getWorkflow(run.kind);
      let end: { output: unknown } | { error: unknown };
      try {
        if (!wf) throw new Error(`no @DurableWorkflow('${run.kind}') on worker ${run.workerId}`);
        end = { output: await run.execute(() => wf.instance.run(run.claim.input, run.context)) };
      } catch (error) {
        end = { error };
      }
      const stop = run.control.stop;
      if (stop) return await this.settleStop(run, stop);
      if ('error' in end) return await this.settleError(run, end.error);
      return await this.succeed(run, end.output);
    } finally {
      run.close();
    }
  }

  private async succeed(run: ActiveRun, output: unknown): Promise<RunAttemptOutcome> {
    let outputJson: string;
    try {
      outputJson = toStoredJson(
        output === undefined ? null : output,
        `output of run kind "${run.kind}"`,
        this.options.limits.maxOutputBytes,
      );
    } catch (err) {
      return this.settleError(run, err);
    }
    return this.finish(run, { status: 'succeeded', outputJson, event: 'run.succeeded', payload: {} });
  }

  /** A run that stopped before its workflow returned, settled by why it stopped. */
  private async settleStop(run: ActiveRun, stop: RunStop): Promise<RunAttemptOutcome> {
    switch (stop.kind) {
      case 'drain':
        return this.release(run, true, 'drain');
      case 'suspended':
        return this.release(run, true, stop.reason);
      case 'released':
        return 'released'; // the draining worker recorded it
      case 'parked':
        // Waits for an operator (approval, a manual in-doubt command) are worth a line; sleeps and signals not.
        if (stop.forOperator) this.logger.log(`${runLabel(run)} parked for an operator: ${stop.reason}`);
        return 'parked';
      case 'lease-lost':
        this.leaseLost(run, stop.error);
        return 'lease_lost';
      case 'cancelled':
      case 'non-determinism':
        return this.settleError(run, stop.error);
    }
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
  async release(run: ActiveRun, atStepBoundary: boolean, reason = 'drain'): Promise<RunAttemptOutcome> {
    return this.finish(
      run,
      {
        status: 'waiting',
        attemptsDelta: run.control.attemptsDelta('give-back'),
        event: 'run.released',
        payload: { reason, workerId: run.workerId, atStepBoundary },
      },
      'released',
    );
  }

  /** The workflow threw: cancelled, failed for good, dead-lettered, or retried later with backoff. */
  private async settleError(run: ActiveRun, err: unknown): Promise<RunAttemptOutcome> {
    if (err instanceof LeaseLostError) {
      this.leaseLost(run, err);
      return 'lease_lost';
    }
    const error = serializeError(err);
    if (err instanceof RunCancelledError)
      return this.finish(run, {
        status: 'cancelled',
        error,
        event: 'run.cancelled',
        payload: { by: 'worker' },
      });
    if (isNonRetryable(err)) {
      const reason = err instanceof NonDeterminismError ? 'non_determinism' : 'non_retryable';
      return this.finish(run, {
        status: 'failed',
        error,
        event: 'run.failed',
        payload: { reason, error: error.message },
      });
    }
    // Transient: the claim already counted one attempt unless a step committed (which reset attempts).
    const attempts = run.control.progressed ? 1 : run.claim.attempts;
    const attemptsDelta = run.control.attemptsDelta('count');
    if (attempts >= run.claim.maxAttempts) {
      return this.finish(run, {
        status: 'dead_lettered',
        error,
        attemptsDelta,
        event: 'run.dead_lettered',
        payload: { reason: 'attempts_exhausted', attempts, error: error.message },
        parkedReason: `attempts exhausted (${attempts}/${run.claim.maxAttempts}): ${error.message}`,
      });
    }
    const r = this.options.reconciler;
    const delayMs = Math.round(
      Math.min(r.backoffMaxMs, r.backoffBaseMs * 2 ** (attempts - 1)) * (0.8 + Math.random() * 0.4),
    );
    return this.finish(run, {
      status: 'waiting',
      error,
      delayMs,
      attemptsDelta,
      event: 'run.retry_scheduled',
      payload: { attempts, delayMs, error: error.message },
    });
  }

  private async finish(
    run: ActiveRun,
    w: FinishWrite,
    outcome?: RunAttemptOutcome,
  ): Promise<RunAttemptOutcome> {
    try {
      await this.store.finish(run.fence, { ...w, records: [...(w.records ?? []), ...run.log.takePending()] });
      if (w.status === 'failed') this.logger.error(`${runLabel(run)} failed${this.detail(w.error)}`);
      else if (w.status === 'dead_lettered') {
        this.logger.error(
          `${runLabel(run)} dead-lettered after ${run.claim.maxAttempts} attempt(s)${this.detail(w.error)}; RunRepository.retry(id) resumes it`,
        );
      }
      return outcome ?? OUTCOMES[w.status];
    } catch (err) {
      if (err instanceof LeaseLostError) {
        this.leaseLost(run, err);
        return 'lease_lost';
      }
      this.logger.error(`could not record ${w.event} for ${runLabel(run)}: ${(err as Error).message}`);
      return 'unrecorded';
    }
  }
}
