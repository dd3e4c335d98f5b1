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

/**
 * The channel values of a checkpoint: the blob of each channel at its version (`empty`: no value). A
 * null-prototype object: a channel named `__proto__` is a key like any other, never the prototype.
 */
export async function channelValues(
  serde: SerializerProtocol,
  blobs: BlobRow[],
): Promise<Record<string, unknown>> {
  const out = Object.create(null) as Record<string, unknown>;
  for (const b of blobs)
    if (b.type !== 'empty' && b.blob) out[b.channel] = await serde.loadsTyped(b.type, b.blob);
  return out;
}

/**
 * The blobs a put writes: each channel of `newVersions` at its version, its value serialised (checked by
 * `cap` first), or `empty` when the checkpoint has none. Own keys only: a channel named `__proto__` is a
 * channel, not the object's prototype.
 */
export function dumpBlobs(
  serde: SerializerProtocol,
  values: Record<string, unknown> | undefined,
  newVersions: Record<string, unknown>,
  cap: (bytes: Uint8Array, channel: string) => void,
): Promise<Array<{ channel: string; version: string; type: string; blob: string | null }>> {
  return Promise.all(
    Object.entries(newVersions).map(async ([channel, version]) => {
      if (!values || !Object.prototype.hasOwnProperty.call(values, channel))
        return { channel, version: String(version), type: 'empty', blob: null };
      const [type, bytes] = await serde.dumpsTyped(values[channel]);
      cap(bytes, channel);
      return { channel, version: String(version), type, blob: Buffer.from(bytes).toString('base64') };
    }),
  );
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
  if (row.type === 'json' && row.checkpoint.includes('"__proto__"'))
    channelsAsData(checkpoint, row.checkpoint);
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
 * The channel names of a checkpoint as data. LangGraph's JSON serializer revives an object by assigning
 * its keys, so a key `__proto__` sets the prototype (or, for a version number, is dropped): a channel
 * named `__proto__` would lose its version, and its value with it. The versions are plain JSON (numbers,
 * strings), so they are read again from the stored text, into null-prototype objects.
 */
function channelsAsData(checkpoint: Checkpoint, bytes: Buffer): void {
  const raw = JSON.parse(bytes.toString('utf8')) as {
    channel_versions?: Record<string, unknown>;
    versions_seen?: Record<string, Record<string, unknown>>;
  };
  const asData = <T>(o: Record<string, unknown>) => Object.assign(Object.create(null), o) as T;
  if (raw.channel_versions) checkpoint.channel_versions = asData(raw.channel_versions);
  if (raw.versions_seen) {
    const seen: Checkpoint['versions_seen'] = Object.create(null);
    for (const [node, versions] of Object.entries(raw.versions_seen))
      Object.defineProperty(seen, node, {
        value: asData(versions),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    checkpoint.versions_seen = seen;
  }
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
