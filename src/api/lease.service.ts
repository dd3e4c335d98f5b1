import { Injectable, Logger } from '@nestjs/common';
import { DurableWorker } from '../engine/worker.service';
import { InvalidArgumentError } from '../errors/invalid-argument.error';
import type { RunLeaseView, WorkerReleaseResult } from '../interfaces/lease.interface';
import { LeaseHolderStore } from '../store/lease-holders.store';
import { requireUuid } from '../util/uuid';

/** The longest worker id the module accepts (`worker.workerId`). */
const MAX_WORKER_ID = 200;

/**
 * Who holds which run, and the way out for runs of a worker known to be dead. Workers claim runs with
 * a lease (renewed by heartbeats) and a fencing token (`epoch`) that every write of theirs carries;
 * the reconciler returns a run whose lease ran out. An orchestrator that knows sooner that a pod is gone
 * (a pod deleted, a node lost) calls `releaseWorker(id)` to hand its runs on without waiting for their
 * leases to run out.
 */
@Injectable()
export class LeaseService {
  private readonly logger = new Logger('DurableExecution');

  /** @internal Created by Nest dependency injection: not part of the API. */
  constructor(
    private readonly store: LeaseHolderStore,
    private readonly worker: DurableWorker,
  ) {}

  /** The lease of a running run (worker, epoch, deadline), or null when no worker holds it. */
  holder(runId: string): Promise<RunLeaseView | null> {
    return this.store.holder(requireUuid(runId, 'runId'));
  }

  /** The runs a worker holds now, soonest lease end first. */
  heldBy(workerId: string): Promise<RunLeaseView[]> {
    return this.store.heldBy(requireWorkerId(workerId));
  }

  /**
   * Releases every run held by `workerId`, a worker known to be dead, in one statement. Each run leaves
   * `running` at once, so anything that worker still tries to write is refused (its fencing token no
   * longer matches); the commands it had reserved become `in_doubt`, settled by their policy when the run
   * resumes. A run with nothing in flight is due at once; one whose worker may still be calling out (a
   * reserved command, a model or tool step started) is due when its old lease would have ended, because a
   * pod reported gone may only be cut off from the network. Each run gets a `run.reconciled` event
   * (reason `worker_gone`). The worker of this process cannot be released (it is alive).
   */
  async releaseWorker(workerId: string): Promise<WorkerReleaseResult[]> {
    requireWorkerId(workerId);
    if (workerId === this.worker.id)
      throw new InvalidArgumentError(
        'workerId',
        'is the worker of this process, which is alive: stop it instead',
      );
    const released = await this.store.releaseWorker(workerId);
    if (released.length)
      this.logger.warn(
        `released ${released.length} run(s) of worker ${JSON.stringify(workerId)} reported gone ` +
          `(${released.filter((r) => r.callInFlight).length} due at their old lease deadline: a call may be in flight)`,
      );
    return released;
  }
}

function requireWorkerId(workerId: unknown): string {
  if (typeof workerId !== 'string' || !workerId.trim())
    throw new InvalidArgumentError(
      'workerId',
      'must be a non-empty string (a worker id, as LeaseService.holder shows it)',
    );
  if (workerId.length > MAX_WORKER_ID)
    throw new InvalidArgumentError('workerId', `must be at most ${MAX_WORKER_ID} characters`);
  return workerId;
}
