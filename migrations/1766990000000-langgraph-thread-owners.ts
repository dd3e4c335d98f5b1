import { MigrationInterface, QueryRunner } from 'typeorm';
import { durableNames } from '../src/store/durable-names';

/**
 * LangGraph threads belong to runs (issue 46 part 3): `langgraph_threads` names, per thread, the run that
 * owns it, the run whose fenced write first reached it (its continue-as-new generations keep its id).
 * `DurablePostgresSaver` inserts the row in the statement of a run's first write (`on conflict do
 * nothing`: one run wins) and refuses another run's reads and writes unless the code shares the thread.
 * The rows already there are adopted: a thread whose rows name a run belongs to the run of its earliest
 * checkpoint (else of its journal, else of its pending writes); a thread whose rows name none (written
 * outside any run) gets no owner, and the first run that writes it adopts it.
 * `langgraph_journal` is keyed by (thread, run): a run that shares another's thread keeps a journal of
 * its own. Down keeps, per thread, the journal updated last.
 */
export class LangGraphThreadOwners1766990000000 implements MigrationInterface {
  name = 'LangGraphThreadOwners1766990000000';
  /** The PostgreSQL schema of the tables (see `durableExecutionMigrations`); unset: unqualified names. */
  schema?: string;

  public async up(q: QueryRunner): Promise<void> {
    const p = durableNames(this.schema).prefix;
    await q.query(`
      create table ${p}langgraph_threads (
        thread_id text primary key,
        run_id uuid not null,
        created_at timestamptz not null default now()
      )`);
    await q.query(`
      insert into ${p}langgraph_threads (thread_id, run_id, created_at)
      select distinct on (thread_id) thread_id, run_id, at
        from (select thread_id, run_id, created_at as at, 0 as rank, checkpoint_id as k
                from ${p}langgraph_checkpoints where run_id is not null
              union all
              select thread_id, run_id, updated_at, 1, '' from ${p}langgraph_journal
              union all
              select thread_id, run_id, now(), 2, checkpoint_id
                from ${p}langgraph_writes where run_id is not null) named
       order by thread_id, rank, at, k`);
    await q.query(
      `alter table ${p}langgraph_journal drop constraint langgraph_journal_pkey, add primary key (thread_id, run_id)`,
    );
  }

  public async down(q: QueryRunner): Promise<void> {
    const p = durableNames(this.schema).prefix;
    await q.query(`
      delete from ${p}langgraph_journal j
       where exists (select 1 from ${p}langgraph_journal k
                      where k.thread_id = j.thread_id and (k.updated_at, k.run_id) > (j.updated_at, j.run_id))`);
    await q.query(
      `alter table ${p}langgraph_journal drop constraint langgraph_journal_pkey, add primary key (thread_id)`,
    );
    await q.query(`drop table if exists ${p}langgraph_threads`);
  }
}
