import type { SerializerProtocol } from '@langchain/langgraph-checkpoint';
import type { SaverFence, SaverQueryable } from './saver-sql';

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
  /**
   * Threads any run may read and write, whoever owns them: `true` (all of them: no ownership), or which
   * (given the thread and the run). A thread belongs to the run that wrote it first (and to its
   * continue-as-new generations); another run that reads or writes it gets `ForeignThreadError` unless
   * it is shared here or by `runGraph`'s `shareThread`. Default: none shared. Outside a run (no fence)
   * the saver checks no owner.
   */
  shareThreads?: boolean | ((threadId: string, runId: string) => boolean);
  /**
   * The largest serialised piece a write may store, in bytes: each channel value, each pending write,
   * a checkpoint without its values, its metadata. A larger one is refused with `PayloadTooLargeError`
   * (naming the channel), nothing written. Default 2 MiB, the module's `limits.maxOutputBytes` default:
   * set it to your module's value if you changed that.
   */
  maxValueBytes?: number;
}
