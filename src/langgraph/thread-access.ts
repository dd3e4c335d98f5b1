import { ForeignThreadError } from '../errors/foreign-thread.error';
import { currentRun, PayloadTooLargeError } from '../index';
import { currentGraph } from './graph-frame';
import type { DurablePostgresSaverOptions } from './saver-options';
import type { SaverFence, SaverTables } from './saver-sql';

/** The default of `maxValueBytes`: the module's default `limits.maxOutputBytes`. */
export const MAX_VALUE_BYTES = 2 << 20;

const COLUMNS = `thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata_type, metadata`;

/**
 * getTuple: the owner of $1 (a thread; null: none) and its latest checkpoint in namespace $2 ($3: that
 * id), in one row (the checkpoint's columns null when there is none).
 */
export function tupleSql(t: SaverTables): string {
  return `select o.run_id::text as owner, c.* from (select 1) one
  left join ${t.threads} o on o.thread_id = $1
  left join lateral (
    select ${COLUMNS} from ${t.checkpoints}
     where thread_id = $1 and checkpoint_ns = $2 and ($3::text is null or checkpoint_id = $3)
     order by checkpoint_id desc limit 1
  ) c on true`;
}

/** list: $1 thread, $2 ns, $3 id, $4 before, $5 limit (each null: any), each row with its thread's owner. */
export function listSql(t: SaverTables): string {
  return `select c.*, o.run_id::text as owner from (
    select ${COLUMNS} from ${t.checkpoints}
     where ($1::text is null or thread_id = $1) and ($2::text is null or checkpoint_ns = $2)
       and ($3::text is null or checkpoint_id = $3) and ($4::text is null or checkpoint_id < $4)
     order by checkpoint_id desc, thread_id, checkpoint_ns
     limit $5) c
  left join ${t.threads} o on o.thread_id = c.thread_id
 order by c.checkpoint_id desc, c.thread_id, c.checkpoint_ns`;
}

/**
 * The owner of $1 (a thread; null: none) and the journal of run $2 on it (null: none); not `ofRun`: the
 * journal of $1 written last, whichever run's.
 */
export function journalSql(t: SaverTables, ofRun: boolean): string {
  if (!ofRun) return `select entries from ${t.journal} where thread_id = $1 order by updated_at desc limit 1`;
  return `select o.run_id::text as owner, j.entries from (select 1) one
  left join ${t.threads} o on o.thread_id = $1
  left join ${t.journal} j on j.thread_id = $1 and j.run_id = $2::uuid`;
}

/** The owner of $1 (a thread), if any. */
export function ownerSql(t: SaverTables): string {
  return `select run_id::text as owner from ${t.threads} where thread_id = $1`;
}

/**
 * What a saver lets the run it serves do: the run is the fence's (`currentRun()` by default); a thread
 * is its own, no run's (written outside runs only: the first run that writes it adopts it), or another
 * run's, usable only when the code shares it (`runGraph`'s `shareThread` for its thread, the saver's
 * `shareThreads`). Outside a run, anything. And the cap on each serialised piece a write stores.
 */
export class ThreadAccess {
  constructor(
    readonly fenceOf: () => SaverFence | undefined = runFence,
    private readonly share: DurablePostgresSaverOptions['shareThreads'] = undefined,
    private readonly maxValueBytes = MAX_VALUE_BYTES,
  ) {}

  /** Refuses a read of another run's thread (`ForeignThreadError`) unless it is shared. */
  mayRead(threadId: string, owner: string | null, runId = this.fenceOf()?.runId): void {
    if (runId !== undefined && !this.readable(threadId, owner, runId))
      throw new ForeignThreadError(threadId, runId, 'read');
  }

  /** Whether the run may read a thread of `owner` (null: none). */
  readable(threadId: string, owner: string | null, runId = this.fenceOf()?.runId): boolean {
    return runId === undefined || owner === null || owner === runId || this.shared(threadId, runId);
  }

  /** Whether the code shares the thread with the run. */
  shared(threadId: string, runId: string): boolean {
    const frame = currentGraph();
    if (frame?.shareThread && frame.threadId === threadId && frame.ctx.runId === runId) return true;
    return this.share === true || (typeof this.share === 'function' && this.share(threadId, runId));
  }

  /** What `runWrite` needs to fence and guard a write of the thread. */
  guard(threadId: string, fence: SaverFence | undefined, during: string) {
    return { threadId, share: !!fence && this.shared(threadId, fence.runId), during };
  }

  /** Refuses a serialised piece above `maxValueBytes`, before anything is sent. */
  capped(bytes: Uint8Array, what: string, threadId: string): void {
    if (bytes.byteLength > this.maxValueBytes)
      throw new PayloadTooLargeError(
        `${what} (thread ${quoted(threadId)}; DurablePostgresSaver's maxValueBytes)`,
        bytes.byteLength,
        this.maxValueBytes,
      );
  }
}

/** The durable run this code runs in, as a fence; none outside runs. */
function runFence(): SaverFence | undefined {
  const ctx = currentRun();
  return ctx ? { runId: ctx.runId, epoch: ctx.epoch } : undefined;
}

/** A name as a message quotes it (at most 200 characters). */
export const quoted = (name: string): string => JSON.stringify(name.slice(0, 200));

/** The own property `key` of `o` (never one of its prototype's: `__proto__` is a key like any other). */
export function ownValue(o: Record<string, unknown> | undefined | null, key: string): unknown {
  return o && Object.prototype.hasOwnProperty.call(o, key) ? o[key] : undefined;
}
