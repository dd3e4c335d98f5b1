import { BaseCheckpointSaver, WRITES_IDX_MAP } from '@langchain/langgraph-checkpoint';
import type {
  ChannelVersions,
  Checkpoint,
  CheckpointListOptions,
  CheckpointMetadata,
  CheckpointTuple,
  PendingWrite,
} from '@langchain/langgraph-checkpoint';
import type { RunnableConfig } from '@langchain/core/runnables';
import { journalOf } from './graph-frame';
import type { JournalEntry } from './graph-frame';
import {
  BlobRow,
  channelValues,
  CheckpointRow,
  configKeys,
  dumpBlobs,
  loadRow,
  migratePendingSends,
} from './saver-rows';
import { pendingWrites, WriteRow } from './saver-rows';
import { b64, deleteThreadSql, journalWriteSql, putSql, putWritesSql, rowsOf, runWrite } from './saver-sql';
import { saverTables, type SaverQueryable, type SaverTables } from './saver-sql';
import type { DurablePostgresSaverOptions } from './saver-options';
import { journalSql, listSql, ownerSql, ownValue, quoted, ThreadAccess, tupleSql } from './thread-access';

/**
 * A LangGraph.js checkpoint saver on the module's PostgreSQL (tables `langgraph_*`, created by the
 * module's migrations). Channel values are stored once per (channel, version), as LangGraph's own
 * PostgreSQL saver does. Inside a durable run every write is fenced: one statement writes only while the
 * run is `running` under the claim's epoch, so a worker that lost its lease (another took the run over)
 * writes no checkpoint and gets `LeaseLostError`. A thread belongs to the run that wrote it first:
 * another run's read or write is refused with `ForeignThreadError` unless the thread is shared
 * (`shareThreads`, `runGraph`'s `shareThread`). Each value is capped (`maxValueBytes`). Outside a run it
 * is an ordinary saver (no fence, no owner). Passes `@langchain/langgraph-checkpoint-validation`.
 */
export class DurablePostgresSaver extends BaseCheckpointSaver {
  private readonly db: SaverQueryable;
  private readonly t: SaverTables;
  private readonly access: ThreadAccess;

  constructor(options: DurablePostgresSaverOptions) {
    super(options.serde);
    this.db = options.db;
    this.t = saverTables(options.schema);
    this.access = new ThreadAccess(options.fence, options.shareThreads, options.maxValueBytes);
  }

  async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const { threadId, ns, checkpointId } = configKeys(config);
    if (threadId === undefined) return undefined;
    // The owner comes with the row (one statement): the values are read only once the thread passes.
    const [row] = await rowsOf<CheckpointRow & { owner: string | null }>(this.db, tupleSql(this.t), [
      threadId,
      ns,
      checkpointId ?? null,
    ]);
    this.access.mayRead(threadId, row?.owner ?? null);
    return row?.checkpoint_id ? this.tupleOf(row) : undefined;
  }

  async *list(config: RunnableConfig, options: CheckpointListOptions = {}): AsyncGenerator<CheckpointTuple> {
    const { threadId, checkpointId } = configKeys(config);
    const ns = (config.configurable as { checkpoint_ns?: string } | undefined)?.checkpoint_ns;
    const before = options.before ? configKeys(options.before).checkpointId : undefined;
    const filter = options.filter && Object.keys(options.filter).length ? options.filter : undefined;
    let limit = options.limit;
    const runId = this.access.fenceOf()?.runId;
    if (threadId !== undefined && runId !== undefined) {
      const [row] = await rowsOf<{ owner: string }>(this.db, ownerSql(this.t), [threadId]);
      this.access.mayRead(threadId, row?.owner ?? null, runId);
    }
    // Inside a run, a list of every thread skips the threads of other runs (the limit counted here).
    const skips = threadId === undefined && runId !== undefined;
    const rows = await rowsOf<CheckpointRow & { owner: string | null }>(this.db, listSql(this.t), [
      threadId ?? null,
      ns ?? null,
      checkpointId ?? null,
      before ?? null,
      filter || skips ? null : (limit ?? null),
    ]);
    for (const row of rows) {
      if (limit !== undefined && limit <= 0) return;
      if (skips && !this.access.readable(row.thread_id, row.owner, runId)) continue;
      const metadata = (await this.serde.loadsTyped(row.metadata_type, row.metadata)) as Record<
        string,
        unknown
      >;
      if (filter && !Object.entries(filter).every(([k, v]) => ownValue(metadata, k) === v)) continue;
      if (limit !== undefined) limit -= 1;
      yield await this.tupleOf(row);
    }
  }

  async put(
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    newVersions: ChannelVersions,
  ): Promise<RunnableConfig> {
    const { threadId, ns, checkpointId: parent } = configKeys(config);
    if (threadId === undefined)
      throw new Error(
        'Failed to put checkpoint: the RunnableConfig has no "thread_id" in its "configurable" property.',
      );
    const { channel_values: values, ...rest } = checkpoint;
    const blobs = await dumpBlobs(this.serde, values, newVersions, (bytes, channel) =>
      this.access.capped(bytes, `value of LangGraph channel ${quoted(channel)}`, threadId),
    );
    const [[type, bytes], [metaType, metaBytes]] = await Promise.all([
      this.serde.dumpsTyped({ ...rest, channel_values: {} }),
      this.serde.dumpsTyped(metadata),
    ]);
    this.access.capped(bytes, `LangGraph checkpoint ${quoted(checkpoint.id)} without its values`, threadId);
    this.access.capped(metaBytes, `metadata of LangGraph checkpoint ${quoted(checkpoint.id)}`, threadId);
    const fence = this.access.fenceOf();
    await runWrite(
      this.db,
      putSql(this.t, !!fence),
      fence,
      [
        threadId,
        ns,
        checkpoint.id,
        parent ?? null,
        type,
        b64(bytes),
        metaType,
        b64(metaBytes),
        JSON.stringify(blobs),
        journalOf(threadId),
      ],
      this.access.guard(threadId, fence, 'a LangGraph checkpoint write'),
    );
    return { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: checkpoint.id } };
  }

  async putWrites(
    config: RunnableConfig,
    writes: PendingWrite[],
    taskId: string,
    taskPath = '',
  ): Promise<void> {
    const { threadId, ns, checkpointId } = configKeys(config);
    if (threadId === undefined)
      throw new Error(
        'Failed to put writes: the RunnableConfig has no "thread_id" in its "configurable" property.',
      );
    if (checkpointId === undefined)
      throw new Error(
        'Failed to put writes: the RunnableConfig has no "checkpoint_id" in its "configurable" property.',
      );
    const rows = await Promise.all(
      writes.map(async ([channel, value], i) => {
        const [type, bytes] = await this.serde.dumpsTyped(value);
        this.access.capped(bytes, `pending write to LangGraph channel ${quoted(channel)}`, threadId);
        const special = ownValue(WRITES_IDX_MAP, channel) as number | undefined;
        return { idx: special ?? i, channel, type, value: b64(bytes) };
      }),
    );
    const fence = this.access.fenceOf();
    await runWrite(
      this.db,
      putWritesSql(this.t, !!fence),
      fence,
      [threadId, ns, checkpointId, taskId, taskPath, JSON.stringify(rows), journalOf(threadId)],
      this.access.guard(threadId, fence, 'a LangGraph pending write'),
    );
  }

  async deleteThread(threadId: string): Promise<void> {
    const fence = this.access.fenceOf();
    await runWrite(
      this.db,
      deleteThreadSql(this.t, !!fence),
      fence,
      [threadId],
      this.access.guard(threadId, fence, 'a LangGraph thread delete'),
    );
  }

  /**
   * The engine calls the durable graph of this run on this thread made, in order (`runGraph` replays
   * them when it resumes the graph); outside a run, those of the run that wrote the thread's journal
   * last. Empty when there are none. Inside a run, a thread of another run is refused as any read.
   */
  async journal(threadId: string): Promise<JournalEntry[]> {
    const runId = this.access.fenceOf()?.runId;
    if (runId !== undefined) return (await this.runJournal(threadId, runId)) ?? [];
    const [row] = await rowsOf<{ entries: JournalEntry[] }>(this.db, journalSql(this.t, false), [threadId]);
    return row?.entries ?? [];
  }

  /**
   * The journal of run `runId` on the thread (undefined: that run's `runGraph` never wrote it), once
   * the thread passed the read check (one statement).
   * @internal
   */
  async runJournal(threadId: string, runId: string): Promise<JournalEntry[] | undefined> {
    type Row = { owner: string | null; entries: JournalEntry[] | null };
    const [row] = await rowsOf<Row>(this.db, journalSql(this.t, true), [threadId, runId]);
    this.access.mayRead(threadId, row?.owner ?? null, runId);
    return row?.entries ?? undefined;
  }

  /**
   * The run's journal of the thread written now, fenced: a model answer durable before its node acts.
   * @internal
   */
  async writeJournal(threadId: string): Promise<void> {
    const fence = this.access.fenceOf();
    const guard = this.access.guard(threadId, fence, 'a LangGraph journal write');
    await runWrite(this.db, journalWriteSql(this.t, !!fence), fence, [threadId, journalOf(threadId)], guard);
  }

  /** The tuple of a row: its channel values, pending writes, and the pending sends of a checkpoint older than version 4. */
  private async tupleOf(row: CheckpointRow): Promise<CheckpointTuple> {
    const { checkpoint, tuple } = await loadRow(this.serde, row);
    const keys = [row.thread_id, row.checkpoint_ns];
    const [blobs, writes] = await Promise.all([
      rowsOf<BlobRow>(
        this.db,
        `select b.channel, b.type, b.blob from ${this.t.blobs} b
           join jsonb_each_text($3::jsonb) v on v.key = b.channel and v.value = b.version
          where b.thread_id = $1 and b.checkpoint_ns = $2`,
        [...keys, JSON.stringify(checkpoint.channel_versions ?? {})],
      ),
      this.writesOf(row.thread_id, row.checkpoint_ns, row.checkpoint_id),
    ]);
    checkpoint.channel_values = await channelValues(this.serde, blobs);
    tuple.pendingWrites = await pendingWrites(this.serde, writes);
    if (checkpoint.v < 4 && row.parent_checkpoint_id)
      await migratePendingSends(
        this.serde,
        checkpoint,
        await this.writesOf(row.thread_id, row.checkpoint_ns, row.parent_checkpoint_id),
      );
    return tuple;
  }

  private writesOf(threadId: string, ns: string, checkpointId: string): Promise<WriteRow[]> {
    return rowsOf<WriteRow>(
      this.db,
      `select task_id, idx, channel, type, value, task_path from ${this.t.writes}
        where thread_id = $1 and checkpoint_ns = $2 and checkpoint_id = $3`,
      [threadId, ns, checkpointId],
    );
  }
}
