import { BaseCheckpointSaver, WRITES_IDX_MAP } from '@langchain/langgraph-checkpoint';
import type {
  ChannelVersions,
  Checkpoint,
  CheckpointListOptions,
  CheckpointMetadata,
  CheckpointTuple,
  PendingWrite,
  SerializerProtocol,
} from '@langchain/langgraph-checkpoint';
import type { RunnableConfig } from '@langchain/core/runnables';
import { currentRun } from '../index';
import { answeredJournal, currentGraph } from './graph-frame';
import type { JournalEntry } from './graph-frame';
import {
  BlobRow,
  channelValues,
  CheckpointRow,
  configKeys,
  loadRow,
  migratePendingSends,
} from './saver-rows';
import { pendingWrites, WriteRow } from './saver-rows';
import { b64, deleteThreadSql, putSql, putWritesSql, rowsOf, runWrite, saverTables } from './saver-sql';
import type { SaverFence, SaverQueryable, SaverTables } from './saver-sql';

/** Options of `DurablePostgresSaver`. */
export interface DurablePostgresSaverOptions {
  /** Where the tables are: a `pg` Pool (or Client), or a TypeORM DataSource, on the module's database. */
  db: SaverQueryable;
  /** The module's `database.schema` (default `public`): the saver's tables and `ai_runs` live there. */
  schema?: string;
  /** LangGraph's serializer (default: its JSON+ serializer). */
  serde?: SerializerProtocol;
  /**
   * The claim writes are fenced by. Default: the durable run this code runs in (`currentRun()`), and
   * no fence outside one. A write whose claim no longer holds the run fails with `LeaseLostError`.
   */
  fence?: () => SaverFence | undefined;
}

const COLUMNS = `thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata_type, metadata`;

/**
 * A LangGraph.js checkpoint saver on the module's PostgreSQL (tables `langgraph_*`, created by the
 * module's migrations). Channel values are stored once per (channel, version), as LangGraph's own
 * PostgreSQL saver does. Inside a durable run every write is fenced: one statement writes only while the
 * run is `running` under the claim's epoch, so a worker that lost its lease (another took the run over)
 * writes no checkpoint and gets `LeaseLostError`. Passes `@langchain/langgraph-checkpoint-validation`.
 */
export class DurablePostgresSaver extends BaseCheckpointSaver {
  private readonly db: SaverQueryable;
  private readonly t: SaverTables;
  private readonly fenceOf: () => SaverFence | undefined;

  constructor(options: DurablePostgresSaverOptions) {
    super(options.serde);
    this.db = options.db;
    this.t = saverTables(options.schema);
    this.fenceOf = options.fence ?? runFence;
  }

  async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const { threadId, ns, checkpointId } = configKeys(config);
    if (threadId === undefined) return undefined;
    const [row] = await rowsOf<CheckpointRow>(
      this.db,
      `select ${COLUMNS} from ${this.t.checkpoints}
        where thread_id = $1 and checkpoint_ns = $2 and ($3::text is null or checkpoint_id = $3)
        order by checkpoint_id desc limit 1`,
      [threadId, ns, checkpointId ?? null],
    );
    return row ? this.tupleOf(row) : undefined;
  }

  async *list(config: RunnableConfig, options: CheckpointListOptions = {}): AsyncGenerator<CheckpointTuple> {
    const { threadId, checkpointId } = configKeys(config);
    const ns = (config.configurable as { checkpoint_ns?: string } | undefined)?.checkpoint_ns;
    const before = options.before ? configKeys(options.before).checkpointId : undefined;
    const filter = options.filter && Object.keys(options.filter).length ? options.filter : undefined;
    let limit = options.limit;
    const rows = await rowsOf<CheckpointRow>(
      this.db,
      `select ${COLUMNS} from ${this.t.checkpoints}
        where ($1::text is null or thread_id = $1) and ($2::text is null or checkpoint_ns = $2)
          and ($3::text is null or checkpoint_id = $3) and ($4::text is null or checkpoint_id < $4)
        order by checkpoint_id desc, thread_id, checkpoint_ns
        limit $5`,
      [threadId ?? null, ns ?? null, checkpointId ?? null, before ?? null, filter ? null : (limit ?? null)],
    );
    for (const row of rows) {
      if (limit !== undefined && limit <= 0) return;
      const metadata = (await this.serde.loadsTyped(row.metadata_type, row.metadata)) as Record<
        string,
        unknown
      >;
      if (filter && !Object.entries(filter).every(([k, v]) => metadata?.[k] === v)) continue;
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
    const blobs = await Promise.all(
      Object.entries(newVersions).map(async ([channel, version]) => {
        if (!(channel in (values ?? {})))
          return { channel, version: String(version), type: 'empty', blob: null };
        const [type, bytes] = await this.serde.dumpsTyped((values as Record<string, unknown>)[channel]);
        return { channel, version: String(version), type, blob: b64(bytes) };
      }),
    );
    const [[type, bytes], [metaType, metaBytes]] = await Promise.all([
      this.serde.dumpsTyped({ ...rest, channel_values: {} }),
      this.serde.dumpsTyped(metadata),
    ]);
    const fence = this.fenceOf();
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
      'a LangGraph checkpoint write',
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
        return { idx: WRITES_IDX_MAP[channel] ?? i, channel, type, value: b64(bytes) };
      }),
    );
    const fence = this.fenceOf();
    await runWrite(
      this.db,
      putWritesSql(this.t, !!fence),
      fence,
      [threadId, ns, checkpointId, taskId, taskPath, JSON.stringify(rows), journalOf(threadId)],
      'a LangGraph pending write',
    );
  }

  async deleteThread(threadId: string): Promise<void> {
    const fence = this.fenceOf();
    await runWrite(this.db, deleteThreadSql(this.t, !!fence), fence, [threadId], 'a LangGraph thread delete');
  }

  /**
   * The engine calls a durable graph of this thread made, in order (`runGraph` replays them when it
   * resumes the graph). Empty for a thread no durable run wrote.
   */
  async journal(threadId: string): Promise<JournalEntry[]> {
    const [row] = await rowsOf<{ entries: JournalEntry[] }>(
      this.db,
      `select entries from ${this.t.journal} where thread_id = $1`,
      [threadId],
    );
    return row?.entries ?? [];
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

/** The durable run this code runs in, as a fence; none outside runs. */
function runFence(): SaverFence | undefined {
  const ctx = currentRun();
  return ctx ? { runId: ctx.runId, epoch: ctx.epoch } : undefined;
}

/** The journal of the `runGraph` of this thread (JSON), written with its checkpoint; null otherwise. */
function journalOf(threadId: string): string | null {
  const frame = currentGraph();
  return frame && frame.threadId === threadId ? JSON.stringify(answeredJournal(frame)) : null;
}
