import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Lease renewal without index writes. Every step commit and heartbeat moves `lease_expires_at`; while
 * that column was indexed, no such UPDATE could be HOT, so each step wrote 5 new index entries into
 * ai_runs (9 with the checkpoint and event) and ~1.3 KB of WAL. The reconciler finds expired leases
 * through the partial index on running rows (`ai_runs_worker_idx`): their number is bounded by total
 * worker concurrency, so scanning them is cheap.
 */
export class HotLeaseRenewal1764600000000 implements MigrationInterface {
  name = 'HotLeaseRenewal1764600000000';

  public async up(q: QueryRunner): Promise<void> {
    await q.query(`drop index if exists ai_runs_lease_idx`);
    // Room on each page for the new row version, so the update can stay on the page (HOT).
    await q.query(`alter table ai_runs set (fillfactor = 80)`);
  }

  public async down(q: QueryRunner): Promise<void> {
    await q.query(`alter table ai_runs reset (fillfactor)`);
    await q.query(`create index ai_runs_lease_idx on ai_runs (lease_expires_at) where status = 'running'`);
  }
}
