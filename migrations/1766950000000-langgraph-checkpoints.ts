import { MigrationInterface, QueryRunner } from 'typeorm';
import { durableNames } from '../src/store/durable-names';

/**
 * The tables of `nestjs-durable-execution/langgraph` (issue 37): LangGraph.js checkpoints kept by
 * `DurablePostgresSaver` beside the runs, migrated with them.
 * - `langgraph_checkpoints`: one row per checkpoint (thread, namespace, id), the checkpoint without its channel
 *   values and its metadata, each serialised by the saver's serde (`type` + bytes);
 * - `langgraph_blobs`: channel values by (thread, namespace, channel, version), written once per new version;
 * - `langgraph_writes`: the pending writes of a checkpoint's tasks;
 * - `langgraph_journal`: per thread of a durable run, the engine calls (commands, signal waits) the graph
 *   made, in order, written in the statement of each checkpoint so that a resumed graph replays them.
 * `run_id` and `epoch` name the claim that wrote a row inside a durable run (null outside one). The
 * names leave the `ai_` prefix to the engine's own tables (tests and tools list those by prefix).
 */
export class LangGraphCheckpoints1766950000000 implements MigrationInterface {
  name = 'LangGraphCheckpoints1766950000000';
  /** The PostgreSQL schema of the tables (see `durableExecutionMigrations`); unset: unqualified names. */
  schema?: string;

  public async up(q: QueryRunner): Promise<void> {
    const p = durableNames(this.schema).prefix;
    await q.query(`
      create table ${p}langgraph_checkpoints (
        thread_id text not null,
        checkpoint_ns text not null default '',
        checkpoint_id text not null,
        parent_checkpoint_id text,
        type text not null,
        checkpoint bytea not null,
        metadata_type text not null,
        metadata bytea not null,
        run_id uuid,
        epoch int,
        created_at timestamptz not null default now(),
        primary key (thread_id, checkpoint_ns, checkpoint_id)
      )`);
    await q.query(`
      create table ${p}langgraph_blobs (
        thread_id text not null,
        checkpoint_ns text not null default '',
        channel text not null,
        version text not null,
        type text not null,
        blob bytea,
        primary key (thread_id, checkpoint_ns, channel, version)
      )`);
    await q.query(`
      create table ${p}langgraph_writes (
        thread_id text not null,
        checkpoint_ns text not null default '',
        checkpoint_id text not null,
        task_id text not null,
        idx int not null,
        channel text not null,
        type text not null,
        value bytea,
        task_path text not null default '',
        run_id uuid,
        epoch int,
        primary key (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
      )`);
    await q.query(`
      create table ${p}langgraph_journal (
        thread_id text primary key,
        run_id uuid not null,
        epoch int not null,
        entries jsonb not null,
        updated_at timestamptz not null default now()
      )`);
  }

  public async down(q: QueryRunner): Promise<void> {
    const p = durableNames(this.schema).prefix;
    for (const t of ['langgraph_journal', 'langgraph_writes', 'langgraph_blobs', 'langgraph_checkpoints'])
      await q.query(`drop table if exists ${p}${t}`);
  }
}
