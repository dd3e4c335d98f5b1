import { MigrationInterface, QueryRunner } from 'typeorm';
import { durableNames } from '../src/store/durable-names';

/**
 * Deterministic replay of fan-out. `seq` is the order in which a result was delivered to the workflow
 * (a run-wide counter taken when its commit is sent); replay delivers recorded results in that order,
 * one per event-loop turn, so code after `Promise.all` reaches its next steps in the same order and
 * gets the same step indexes and command keys. `fingerprint` is a hash of the step's name and
 * arguments: a replay that asks for another call at a recorded index fails with NonDeterminismError
 * instead of receiving another call's result. Both are null on rows written before this migration
 * (replayed in index order, not compared).
 */
export class ReplayOrder1764700000000 implements MigrationInterface {
  name = 'ReplayOrder1764700000000';
  /** The PostgreSQL schema of the tables (see `durableExecutionMigrations`); unset: unqualified names. */
  schema?: string;

  public async up(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`alter table ${t.checkpoints} add column seq integer, add column fingerprint text`);
  }

  public async down(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`alter table ${t.checkpoints} drop column seq, drop column fingerprint`);
  }
}
