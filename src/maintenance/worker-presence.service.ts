import {
  BeforeApplicationShutdown,
  Inject,
  Injectable,
  Logger,
  OnApplicationBootstrap,
} from '@nestjs/common';
import { DURABLE_EXECUTION_OPTIONS } from '../durable-execution.constants';
import { DURABLE_JOB_NAMES, DurableJobs, jobName } from '../engine/durable-jobs';
import { DurableRegistry } from '../engine/durable.registry';
import { handoffKinds } from '../engine/handoff-desk';
import { replayOnly } from '../engine/replay-check-report';
import { DurableWorker } from '../engine/worker.service';
import type { ResolvedDurableOptions } from '../options/durable-execution-options.interface';
import { WorkerPresenceStore } from '../store/worker-presence.store';
import { IntervalTask } from './interval-task';

/** A presence row not renewed for this many periods no longer counts. */
const PRESENCE_PERIODS = 3;

/**
 * A worker's presence row (`ai_workers`): which kinds this process serves, written at start, renewed on
 * `worker.presenceIntervalMs` (job `durable-execution:worker-presence`), removed when the drain begins
 * (a draining worker takes no new run). What `start()` in a producer-only process and the operator's
 * "due with no worker" read. Never on a run's path. @internal
 */
@Injectable()
export class WorkerPresence implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('DurableExecution');
  private readonly beats = new IntervalTask('worker presence', () => this.beat());
  private beaten = false;

  constructor(
    private readonly store: WorkerPresenceStore,
    private readonly registry: DurableRegistry,
    private readonly jobs: DurableJobs,
    @Inject(DURABLE_EXECUTION_OPTIONS) private readonly options: ResolvedDurableOptions,
    private readonly worker: DurableWorker,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    if (!this.options.worker.enabled || replayOnly()) return;
    // A first row at once, so a start() right after boot sees this worker; a failure is retried by the job.
    // The worker's claims offer its hand-off slots in this row: its first claim (already on its way, the
    // worker starts first) found no row to offer in, or its offer was withdrawn by this first beat, so
    // it claims once more now.
    await this.beat().then(
      () => this.worker.nudge(),
      (err: unknown) =>
        this.logger.warn(
          `worker presence failed (will retry): ${err instanceof Error ? err.message : String(err)}`,
        ),
    );
    const name = jobName(DURABLE_JOB_NAMES.presence, this.options.database.schema);
    this.beats.start(
      this.jobs,
      name,
      { everyMs: this.options.worker.presenceIntervalMs },
      { keepAlive: false },
    );
  }

  async beforeApplicationShutdown(): Promise<void> {
    if (!this.beats.started) return;
    await this.beats.stop();
    await this.store.leave(this.options.worker.workerId).catch(() => undefined);
  }

  private beat(): Promise<void> {
    const { workerId, presenceIntervalMs, handoffLeaseMs } = this.options.worker;
    const kinds = this.registry.kinds();
    const versions = Object.fromEntries(kinds.map((k) => [k, this.registry.versions(k)]));
    // The first beat withdraws the slots an earlier process with this worker id may have left offered.
    const first = !this.beaten;
    const handoff = { kinds: handoffKinds(this.registry, handoffLeaseMs), leaseMs: handoffLeaseMs, first };
    return this.store
      .beat(workerId, kinds, presenceIntervalMs * PRESENCE_PERIODS, versions, handoff)
      .then(() => void (this.beaten = true));
  }
}
