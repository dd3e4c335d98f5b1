import { Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { replayOnly } from '../engine/replay-check-report';
import { ReplicationStore } from '../store/replication.store';
import { replicationReport, ReplicationReport } from '../util/replication-report';

/**
 * At start-up, reads what a failover of the database would mean for the module (its sessions'
 * `synchronous_commit`, `synchronous_standby_names`, the standbys streaming) and logs a warning for each
 * thing to change (docs/OPERATIONS.md, "Replication and failover"). Never blocks the boot: a failed read
 * is one warning. The health route reports the same (`replication`). @internal
 */
@Injectable()
export class ReplicationCheck implements OnApplicationBootstrap {
  private readonly logger = new Logger('DurableExecution');

  constructor(private readonly store: ReplicationStore) {}

  async onApplicationBootstrap(): Promise<void> {
    if (replayOnly()) return;
    await this.check().catch((err: unknown) =>
      this.logger.warn(`replication check failed: ${err instanceof Error ? err.message : String(err)}`),
    );
  }

  /** Reads the settings, logs each warning, and returns the report. */
  async check(): Promise<ReplicationReport> {
    const report = replicationReport(await this.store.read());
    for (const w of report.warnings) this.logger.warn(`replication (${report.mode}): ${w}`);
    if (!report.warnings.length) this.logger.log(`replication: ${report.mode}`);
    return report;
  }
}
