import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `RunRepository.result(id)` waits for a run through NOTIFY, not by polling. A run is announced on
 * `durable_execution_done` when it ends only if someone waits for it (`notify_on_finish`, set by the
 * waiter), so runs nobody awaits add no NOTIFY (and no commit-time notify lock) to their finish.
 * Adding a column with a constant default is a catalogue change only: no table rewrite.
 */
export class RunResultNotify1764800000000 implements MigrationInterface {
  name = 'RunResultNotify1764800000000';

  public async up(q: QueryRunner): Promise<void> {
    await q.query(`alter table ai_runs add column notify_on_finish boolean not null default false`);
  }

  public async down(q: QueryRunner): Promise<void> {
    await q.query(`alter table ai_runs drop column notify_on_finish`);
  }
}
