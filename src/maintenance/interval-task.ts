import { Logger } from '@nestjs/common';
import type { DurableJobs, JobCadence, ScheduledJob } from '../engine/durable-jobs';

/**
 * A background sweep run as a job of the module (see DurableJobs: in the app's SchedulerRegistry when
 * it imports ScheduleModule.forRoot(), else a timer of its own): a tick that comes while the previous
 * one still runs is skipped, a tick that fails is logged as a warning (the next one retries), and
 * `stop` ends the job and waits for the tick in progress. @internal
 */
export class IntervalTask {
  private readonly logger = new Logger('DurableExecution');
  private job?: ScheduledJob;
  private running?: Promise<void>;

  /**
   * @param name what failed, in the warning (`<name> failed (will retry): <message>`)
   * @param tick one sweep
   */
  constructor(
    private readonly name: string,
    private readonly tick: () => Promise<void>,
  ) {}

  /** Whether the job runs (between `start` and `stop`). */
  get started(): boolean {
    return this.job !== undefined;
  }

  /**
   * Starts the job `jobName` on `cadence`. `keepAlive: false`: it never keeps a process alive on its
   * own; `true` is for a task a process may live on (it ends with `stop`).
   */
  start(
    jobs: DurableJobs,
    jobName: string,
    cadence: JobCadence,
    { keepAlive }: { keepAlive: boolean },
  ): void {
    this.job = jobs.start(jobName, cadence, () => void this.safeTick(), keepAlive);
  }

  /** Ends the job; resolves once a tick in progress has ended. */
  async stop(): Promise<void> {
    this.job?.stop();
    this.job = undefined;
    await this.running;
  }

  private safeTick(): Promise<void> {
    if (this.running) return this.running;
    this.running = this.tick()
      .catch((err) => this.logger.warn(`${this.name} failed (will retry): ${(err as Error).message}`))
      .finally(() => (this.running = undefined));
    return this.running;
  }
}
