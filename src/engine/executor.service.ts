import { announceResume } from './worker-announce';
import { Inject, Injectable, Logger } from '@nestjs/common';
import { DURABLE_EXECUTION_OPTIONS } from '../durable-execution.constants';
import { DurableRegistry } from './durable.registry';
import { LeaseLostError } from '../errors/lease-lost.error';
import type { ResolvedDurableOptions } from '../options/durable-execution-options.interface';
import { DurableObservers } from './durable-observers';
import type { RunAttemptOutcome } from '../interfaces/durable-observer.interface';
import { redactErrorMessage } from '../options/redact';
import type { ClaimedRun } from '../store/run-state/claim-runs';
import type { FinishWrite } from '../store/run-state/finish-run';
import { RunStateStore } from '../store/run-state/run-state.store';
import { DurableTransactionStore } from '../store/transactions/transaction.store';
import { ActiveRun } from './active-run';
import type { RunStop } from './run-stop';
import { errorWrite, failedWrite, finishCarries, OUTCOMES, runLabel, successWrite } from './run-settlement';
import { ReplayChecker } from './replay-check';
import { cleansUp, WorkflowInstance } from './cleanup-phase';
import { driveCleanup } from './run-cleanup';
import { drivePhase, PhaseEnd } from './drive-phase';
import { checkAfterAttempt, replayCheckTarget } from './replay-check-report';

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
    private readonly checker: ReplayChecker,
    private readonly transactions: DurableTransactionStore,
  ) {}

  /** Prepares the in-memory driver of a claimed run (one query for all its checkpoints and commands). */
  async prepare(claim: ClaimedRun, workerId: string): Promise<ActiveRun> {
    announceResume(this.logger, claim, workerId);
    // A first claim has nothing recorded: skip the read (one statement less per new run).
    const { checkpoints, commands } =
      claim.epoch === 1
        ? { checkpoints: new Map(), commands: new Map() }
        : await this.store.loadForReplay(claim.id);
    const run = new ActiveRun(claim, workerId, checkpoints, commands, this.store, this.options);
    if (this.observers.active) run.observers = this.observers;
    run.kindMeta = (kind) => this.registry.getWorkflow(kind)?.meta;
    run.transactions = this.transactions;
    return run;
  }

  /** Runs the workflow and settles the run. Never throws: every outcome is recorded or logged. */
  async drive(run: ActiveRun): Promise<void> {
    await this.driveAttempt(run);
    const target = replayCheckTarget();
    if (target) await checkAfterAttempt(this.checker, this.logger, run.runId, target);
  }

  private async driveAttempt(run: ActiveRun): Promise<void> {
    if (!this.observers.active) await this.attempt(run);
    else await this.observers.runAttempt(run.attemptInfo(), () => this.attempt(run));
  }

  /** One attempt: the workflow from the top, then the run settled by how it ended. */
  private async attempt(run: ActiveRun): Promise<RunAttemptOutcome> {
    try {
      const wf = this.registry.getWorkflow(run.kind, run.claim.version ?? 1);
      // A cancelled run that cleans up: its run() is over (the cancel stopped it), its cleanup resumes.
      if (wf && run.claim.cancelRequested && cleansUp(wf.instance))
        return await this.cleanUp(run, wf.instance);
      const end: PhaseEnd = wf
        ? await drivePhase(run, () => wf.instance.run(run.claim.input, run.context))
        : { error: new Error(`no version ${run.claim.version ?? 1} of '${run.kind}' on ${run.workerId}`) };
      if ('error' in end) run.endedWith = end.error;
      // A cancel a step's commit (or a heartbeat) reported after run()'s last boundary still wins.
      if (!run.control.stop && run.control.cancelRequested)
        run.control.halt({ kind: 'cancelled', error: run.control.cancelled() });
      const stop = run.control.stop;
      if (stop?.kind === 'cancelled' && wf && cleansUp(wf.instance))
        return await this.cleanUp(run, wf.instance);
      if (stop) return await this.settleStop(run, stop);
      if ('error' in end) return await this.settleError(run, end.error);
      const outcome = await this.succeed(run, end.output, !!wf && cleansUp(wf.instance));
      // The finish found a cancel request that came after the last commit: the cleanup runs now.
      if (run.control.cleanUpNext && wf && cleansUp(wf.instance)) return await this.cleanUp(run, wf.instance);
      return outcome;
    } finally {
      run.close();
    }
  }

  /** The cleanup phase of a cancelled run (`onCancel`), then the run settled as it says. */
  private async cleanUp(run: ActiveRun, wf: Required<WorkflowInstance>): Promise<RunAttemptOutcome> {
    const end = await driveCleanup(run, wf, this.store);
    if ('stop' in end) return this.settleStop(run, end.stop);
    if ('lost' in end) return this.settleError(run, end.lost);
    if ('unrecorded' in end) {
      this.logger.error(`could not begin the cleanup of ${runLabel(run)}: ${end.unrecorded.message}`);
      return 'unrecorded';
    }
    if (end.write.payload.cleanup === 'failed')
      this.logger.error(
        `${runLabel(run)}: its onCancel cleanup failed${this.detail({ message: end.write.payload.cleanupError })}`,
      );
    return this.finish(run, end.write);
  }

  private async succeed(
    run: ActiveRun,
    output: unknown,
    cleansUpOnCancel: boolean,
  ): Promise<RunAttemptOutcome> {
    let write: FinishWrite;
    try {
      write = successWrite(run, output, this.options.limits.maxOutputBytes, cleansUpOnCancel);
    } catch (err) {
      return this.settleError(run, err);
    }
    return this.finish(run, write);
  }

  /** A run that stopped before its workflow returned, settled by why it stopped. */
  private async settleStop(run: ActiveRun, stop: RunStop): Promise<RunAttemptOutcome> {
    switch (stop.kind) {
      // A body abandoned while it ran may still send until the lease it gives up ends (refused by then).
      case 'drain':
        return this.release(run, true, 'drain', run.control.abandoned > 0);
      case 'suspended':
        return this.release(run, true, stop.reason, run.control.abandoned > 0);
      case 'released':
        return 'released'; // the draining worker recorded it
      case 'parked':
        // Waits for an operator (approval, a manual in-doubt command) are worth a line; sleeps and signals not.
        if (stop.forOperator) this.logger.log(`${runLabel(run)} parked for an operator: ${stop.reason}`);
        return 'parked';
      case 'lease-lost':
        this.leaseLost(run, stop.error);
        return 'lease_lost';
      case 'retry':
        return this.settleError(run, stop.cause, 'transient');
      case 'usage':
        return this.finish(run, failedWrite(stop.error, 'usage'));
      case 'non-determinism':
        this.logger.warn(`${runLabel(run)} held for a fixed deploy: ${stop.error.message}`);
        return this.settleError(run, stop.error);
      case 'cancelled':
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
   * a drain, not a failure (the claim's attempt is given back unless a step committed). With
   * `callInFlight` it is due when the lease it gives up would have ended, not at once.
   */
  async release(
    run: ActiveRun,
    atStepBoundary: boolean,
    reason = 'drain',
    callInFlight = false,
  ): Promise<RunAttemptOutcome> {
    return this.finish(
      run,
      {
        status: 'waiting',
        attemptsDelta: run.control.attemptsDelta('give-back'),
        delayMs: callInFlight ? 'lease-end' : 0,
        event: 'run.released',
        payload: { reason, workerId: run.workerId, atStepBoundary, callInFlight },
      },
      'released',
    );
  }

  /**
   * The workflow threw: cancelled, failed for good, dead-lettered, or retried later with backoff.
   * `transient`: retried whatever the error is (the engine decided it, e.g. a command in doubt).
   */
  private async settleError(run: ActiveRun, err: unknown, how?: 'transient'): Promise<RunAttemptOutcome> {
    if (err instanceof LeaseLostError) {
      this.leaseLost(run, err);
      return 'lease_lost';
    }
    return this.finish(run, errorWrite(run, err, this.options.reconciler, how));
  }

  private async finish(
    run: ActiveRun,
    w: FinishWrite,
    outcome?: RunAttemptOutcome,
  ): Promise<RunAttemptOutcome> {
    try {
      const { pending, step } = await finishCarries(run);
      const unsent = [...run.control.unsent];
      const payload = unsent.length ? { ...w.payload, notSent: unsent } : w.payload;
      const written = await this.store.finish(run.fence, {
        ...w,
        payload,
        records: [...(w.records ?? []), ...pending],
        unsent,
        step,
      });
      if (written === 'running') {
        // Still this claim's, cancelled: the caller goes on to the cleanup.
        run.control.cleanUpNext = true;
        run.control.halt({ kind: 'cancelled', error: run.control.cancelled() });
        return 'cancelled';
      }
      if (written === 'cancelled' && w.status !== 'cancelled') return 'cancelled';
      if (w.status === 'failed')
        this.logger.error(`${runLabel(run)} failed${this.detail(w.error)}${w.hint ?? ''}`);
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
