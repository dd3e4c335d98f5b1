import { MigrationInterface, QueryRunner } from 'typeorm';
import { durableNames } from '../src/store/durable-names';

/**
 * Hand-off (issue 47): a start hands a due run to an idle worker in its own statement, so the worker
 * begins without a claim commit (docs/ARCHITECTURE.md, "Hand-off"). A worker's presence row says what it
 * takes: `handoff_slots`, how many runs a start may still hand it (its claims keep them free),
 * `handoff_runs`, the runs starts handed it since its claim last read the row, `handoff_kinds`, the kinds
 * it takes that way (no concurrency or rate limit, no debounce), `handoff_ms`, the short lease a handed
 * run gets, `handoff_token`, the worker process that offered the slots (a restart under the same worker
 * id does not take its predecessor's hand-offs), and `record_format`, the newest record format it replays. `ai_runs.handoff_expires_at` is a
 * handed run's first lease: while `lease_expires_at` still equals it, the worker has written nothing
 * (no step, no renewal), and a lapse gives the attempt back. All defaulted or nullable (expand only: a
 * release before this one never offers a slot, so no start hands it anything); a catalog change, no
 * index. Numbered before the events partitioning, which stays the newest migration.
 */
export class WorkerHandoff1766998000000 implements MigrationInterface {
  name = 'WorkerHandoff1766998000000';
  /** The PostgreSQL schema of the tables (see `durableExecutionMigrations`); unset: unqualified names. */
  schema?: string;

  public async up(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(
      `alter table ${t.workers} add column handoff_slots integer not null default 0,
                                add column handoff_runs uuid[] not null default '{}',
                                add column handoff_kinds text[] not null default '{}',
                                add column handoff_ms integer,
                                add column handoff_token integer,
                                add column record_format integer`,
    );
    await q.query(`alter table ${t.runs} add column handoff_expires_at timestamptz`);
  }

  public async down(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`alter table ${t.runs} drop column handoff_expires_at`);
    await q.query(
      `alter table ${t.workers} drop column record_format, drop column handoff_token, drop column handoff_ms,
                                drop column handoff_kinds,
                                drop column handoff_runs, drop column handoff_slots`,
    );
  }
}
