import {
  compareWritesSortKeys,
  maxChannelVersion,
  TASKS,
  writesSortKey,
} from '@langchain/langgraph-checkpoint';
import type {
  Checkpoint,
  CheckpointPendingWrite,
  CheckpointTuple,
  SerializerProtocol,
} from '@langchain/langgraph-checkpoint';
import type { RunnableConfig } from '@langchain/core/runnables';

/** A row of `langgraph_checkpoints` as the saver reads it. */
export interface CheckpointRow {
  thread_id: string;
  checkpoint_ns: string;
  checkpoint_id: string;
  parent_checkpoint_id: string | null;
  type: string;
  checkpoint: Buffer;
  metadata_type: string;
  metadata: Buffer;
}

/** A row of `langgraph_blobs`. */
export interface BlobRow {
  channel: string;
  type: string;
  blob: Buffer | null;
}

/** A row of `langgraph_writes`. */
export interface WriteRow {
  task_id: string;
  idx: number;
  channel: string;
  type: string;
  value: Buffer | null;
  task_path: string;
}

/** The channel values of a checkpoint: the blob of each channel at its version (`empty`: no value). */
export async function channelValues(
  serde: SerializerProtocol,
  blobs: BlobRow[],
): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  for (const b of blobs)
    if (b.type !== 'empty' && b.blob) out[b.channel] = await serde.loadsTyped(b.type, b.blob);
  return out;
}

/** Pending writes in LangGraph's order (task path, task id, index). */
export async function pendingWrites(
  serde: SerializerProtocol,
  rows: WriteRow[],
): Promise<CheckpointPendingWrite[]> {
  const sorted = rows
    .map((r) => ({ r, key: writesSortKey(r.task_path, r.task_id, r.idx) }))
    .sort((a, b) => compareWritesSortKeys(a.key, b.key));
  return Promise.all(
    sorted.map(
      async ({ r }) =>
        [r.task_id, r.channel, r.value ? await serde.loadsTyped(r.type, r.value) : undefined] as const,
    ),
  ) as Promise<CheckpointPendingWrite[]>;
}

/** Everything of a tuple but what needs more reads (values, writes, the pending sends of a v < 4). */
export interface LoadedRow {
  checkpoint: Checkpoint;
  tuple: CheckpointTuple;
}

/** The checkpoint and metadata of a row, and the tuple's configs. */
export async function loadRow(serde: SerializerProtocol, row: CheckpointRow): Promise<LoadedRow> {
  const checkpoint = (await serde.loadsTyped(row.type, row.checkpoint)) as Checkpoint;
  const config: RunnableConfig = {
    configurable: {
      thread_id: row.thread_id,
      checkpoint_ns: row.checkpoint_ns,
      checkpoint_id: row.checkpoint_id,
    },
  };
  const tuple: CheckpointTuple = {
    config,
    checkpoint,
    metadata: await serde.loadsTyped(row.metadata_type, row.metadata),
    pendingWrites: [],
  };
  if (row.parent_checkpoint_id)
    tuple.parentConfig = {
      configurable: {
        thread_id: row.thread_id,
        checkpoint_ns: row.checkpoint_ns,
        checkpoint_id: row.parent_checkpoint_id,
      },
    };
  return { checkpoint, tuple };
}

/**
 * A checkpoint of format v < 4 kept its pending sends as writes of its parent's `TASKS` channel; they
 * become the `TASKS` channel's value, as LangGraph's own savers migrate them on read.
 */
export async function migratePendingSends(
  serde: SerializerProtocol,
  checkpoint: Checkpoint,
  parentWrites: WriteRow[],
): Promise<void> {
  const sends = (await pendingWrites(serde, parentWrites))
    .filter(([, channel]) => channel === TASKS)
    .map(([, , value]) => value);
  checkpoint.channel_values ??= {};
  checkpoint.channel_values[TASKS] = sends;
  checkpoint.channel_versions ??= {};
  const versions = Object.values(checkpoint.channel_versions);
  checkpoint.channel_versions[TASKS] = versions.length ? maxChannelVersion(...versions) : 1;
}

/** The thread, namespace and checkpoint id of a config (the thread required for writes). */
export function configKeys(config: RunnableConfig): {
  threadId?: string;
  ns: string;
  checkpointId?: string;
} {
  const c = (config.configurable ?? {}) as Record<string, unknown>;
  const str = (v: unknown) => (typeof v === 'string' || typeof v === 'number' ? String(v) : undefined);
  return {
    threadId: str(c.thread_id),
    ns: str(c.checkpoint_ns) ?? '',
    checkpointId: str(c.checkpoint_id) ?? str(c.thread_ts),
  };
}
