import { MigrationInterface, QueryRunner } from 'typeorm';
import { durableNames } from '../src/store/durable-names';

/**
 * Lease renewal without index writes. Every step commit and heartbeat moves `lease_expires_at`; while
 * that column was indexed, no such UPDATE could be HOT, so each step wrote 5 new index entries into
 * ai_runs (9 with the checkpoint and event) and ~1.3 KB of WAL. The reconciler finds expired leases
 * through the partial index on running rows (`ai_runs_worker_idx`): their number is bounded by total
 * worker concurrency, so scanning them is cheap.
 */
export class HotLeaseRenewal1764600000000 implements MigrationInterface {
  name = 'HotLeaseRenewal1764600000000';
  /** The PostgreSQL schema of the tables (see `durableExecutionMigrations`); unset: unqualified names. */
  schema?: string;

  public async up(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`drop index if exists ${t.prefix}ai_runs_lease_idx`);
    // Room on each page for the new row version, so the update can stay on the page (HOT).
    await q.query(`alter table ${t.runs} set (fillfactor = 80)`);
  }

  public async down(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`alter table ${t.runs} reset (fillfactor)`);
    await q.query(`create index ai_runs_lease_idx on ${t.runs} (lease_expires_at) where status = 'running'`);
  }
}
