import { MigrationInterface, QueryRunner } from 'typeorm';
import { durableNames } from '../src/store/durable-names';

/**
 * Commands gain an `approved` state (approval granted, not yet dispatched) and the operator's note;
 * signals are looked up by run and name. The run row remembers the deadline of a pending wait.
 */
export class CommandApprovalStates1764500000000 implements MigrationInterface {
  name = 'CommandApprovalStates1764500000000';
  /** The PostgreSQL schema of the tables (see `durableExecutionMigrations`); unset: unqualified names. */
  schema?: string;

  public async up(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`alter table ${t.commands} drop constraint ai_commands_status_check`);
    await q.query(`
      alter table ${t.commands} add constraint ai_commands_status_check check (status in
        ('pending', 'succeeded', 'failed', 'in_doubt', 'awaiting_approval', 'approved', 'rejected'))`);
    await q.query(`alter table ${t.commands} add column decision_note text`);
  }

  public async down(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`alter table ${t.commands} drop column decision_note`);
    await q.query(`update ${t.commands} set status = 'pending' where status = 'approved'`);
    await q.query(`alter table ${t.commands} drop constraint ai_commands_status_check`);
    await q.query(`
      alter table ${t.commands} add constraint ai_commands_status_check check (status in
        ('pending', 'succeeded', 'failed', 'in_doubt', 'awaiting_approval', 'rejected'))`);
  }
}
