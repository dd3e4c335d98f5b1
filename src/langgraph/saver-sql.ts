import { ForeignThreadError } from '../errors/foreign-thread.error';
import { InvalidArgumentError, LeaseLostError } from '../index';

/**
 * The statements of `DurablePostgresSaver`, on the tables of migrations 1766950000000 and 1766990000000
 * in the module's schema. Every write is one statement whose first CTE, `fence`, decides: inside a
 * durable run it is the run's row locked only if the run is still `running` under the claim's epoch on
 * the server's current timeline (the test every fenced write of the engine makes); outside a run, one
 * unconditional row. Inside a run the next CTEs, `own` and `ok`, decide whose thread it is: the run's
 * first write of a thread makes it the thread's owner (`langgraph_threads`, `on conflict do nothing`: one
 * run wins), and `ok` keeps the fence's row only when the thread is the run's or the code shares it.
 * Every insert reads `ok`, so a claim that was superseded, or a run that names another's thread, writes
 * nothing and gets no row back.
 */

/** Anything that runs a parameterised statement: a `pg` Pool or Client, or a TypeORM DataSource. */
export interface SaverQueryable {
  query(text: string, values?: unknown[]): Promise<unknown>;
}

/** The claim a write is fenced by: the run and its epoch (`RunContext.runId`, `RunContext.epoch`). */
export interface SaverFence {
  runId: string;
  epoch: number;
}

/** The saver's table names in a schema. */
export interface SaverTables {
  runs: string;
  checkpoints: string;
  blobs: string;
  writes: string;
  journal: string;
  threads: string;
}

const SCHEMA = /^(?!pg_)[a-z_][a-z0-9_]{0,62}$/;

/** The names of the saver's tables (and of the runs table it fences by) in `schema` (default `public`). */
export function saverTables(schema?: string): SaverTables {
  if (schema !== undefined && (!SCHEMA.test(schema) || schema === 'information_schema'))
    throw new InvalidArgumentError('schema', 'must be a plain lowercase PostgreSQL identifier');
  const p = schema === undefined || schema === 'public' ? '' : `"${schema}".`;
  return {
    runs: `${p}ai_runs`,
    checkpoints: `${p}langgraph_checkpoints`,
    blobs: `${p}langgraph_blobs`,
    writes: `${p}langgraph_writes`,
    journal: `${p}langgraph_journal`,
    threads: `${p}langgraph_threads`,
  };
}

/** The WAL timeline of the server (as the engine's fence compares it with the claim's). */
const CURRENT_TIMELINE = `('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int`;

/**
 * The `fence` CTE, binding $1 (run id) and $2 (epoch), and the `ok` CTE the writes read: inside a run
 * (`fenced`), the fence's row when $3 (the thread) is the run's, the code shares it (`share`, a boolean
 * parameter) or, for `claim` writes, it is new (then the run owns it from this statement on); outside
 * a run the fence's row (no owner, as any LangGraph saver). `owner` lists the thread's owner as this
 * statement sees it (`own`: the row it inserted; none when a concurrent first write won the race, which
 * the caller tells from a foreign owner by its count and runs again).
 */
function guardCtes(t: SaverTables, fenced: boolean, share: string, claim = true): string {
  if (!fenced)
    return `fence as (select $1::uuid as id, $2::int as epoch),\nok as (select id, epoch from fence)`;
  const own = claim
    ? `own as (
  insert into ${t.threads} (thread_id, run_id) select $3, fence.id from fence
  on conflict (thread_id) do nothing
  returning run_id
),
owner as (select run_id from own union all select run_id from ${t.threads} where thread_id = $3),`
    : `owner as (select run_id from ${t.threads} where thread_id = $3),`;
  return `fence as (
  select id, epoch from ${t.runs}
   where id = $1::uuid and epoch = $2::int and status = 'running' and timeline = ${CURRENT_TIMELINE}
   for no key update
),
${own}
ok as (
  select id, epoch from fence
   where ${share}::boolean or exists (select 1 from owner where owner.run_id = fence.id)${claim ? '' : '\n      or not exists (select 1 from owner)'}
)`;
}

/** What every write statement answers: the fence's rows, the rows `ok` kept, the owners it saw. */
const GUARD_COUNTS = `select (select count(*) from fence)::int as n, (select count(*) from ok)::int as ok,
       (select count(*) from owner)::int as owners`;
const UNFENCED_COUNTS = `select count(*)::int as n, count(*)::int as ok, 1 as owners from fence`;

/**
 * The journal upsert CTE (`jr`) for $3 thread and `param` entries (null: none): one row per thread and
 * run, which only ever grows.
 */
function journalCte(t: SaverTables, param: string): string {
  return `jr as (
  insert into ${t.journal} as j (thread_id, run_id, epoch, entries)
  select $3, ok.id, ok.epoch, ${param}::jsonb from ok where ${param}::jsonb is not null and ok.id is not null
  on conflict (thread_id, run_id) do update
     set entries = excluded.entries, epoch = excluded.epoch, updated_at = now()
   where jsonb_array_length(excluded.entries) >= jsonb_array_length(j.entries)
  returning 1
)`;
}

/**
 * put: $3 thread, $4 ns, $5 id, $6 parent id, $7 type, $8 checkpoint, $9 meta type, $10 meta, $11 blobs,
 * $12 journal, and inside a run $13 share.
 */
export function putSql(t: SaverTables, fenced: boolean): string {
  return `with ${guardCtes(t, fenced, '$13')},
cp as (
  insert into ${t.checkpoints} (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint,
                                metadata_type, metadata, run_id, epoch)
  select $3, $4, $5, $6, $7, decode($8, 'base64'), $9, decode($10, 'base64'), ok.id, ok.epoch from ok
  on conflict (thread_id, checkpoint_ns, checkpoint_id) do update
     set parent_checkpoint_id = excluded.parent_checkpoint_id, type = excluded.type, checkpoint = excluded.checkpoint,
         metadata_type = excluded.metadata_type, metadata = excluded.metadata, run_id = excluded.run_id,
         epoch = excluded.epoch
  returning 1
), bl as (
  insert into ${t.blobs} (thread_id, checkpoint_ns, channel, version, type, blob)
  select $3, $4, b.channel, b.version, b.type, decode(b.blob, 'base64')
    from ok, jsonb_to_recordset($11::jsonb) as b(channel text, version text, type text, blob text)
  on conflict (thread_id, checkpoint_ns, channel, version) do nothing
  returning 1
), ${journalCte(t, '$12')}
${fenced ? GUARD_COUNTS : UNFENCED_COUNTS}`;
}

/**
 * putWrites: $3 thread, $4 ns, $5 checkpoint id, $6 task id, $7 task path, $8 writes, $9 journal, and
 * inside a run $10 share. A
 * regular write (idx >= 0) already stored is kept; a special one (error, interrupt, resume: idx < 0)
 * is replaced, as LangGraph's in-memory saver does.
 */
export function putWritesSql(t: SaverTables, fenced: boolean): string {
  return `with ${guardCtes(t, fenced, '$10')},
w as (
  insert into ${t.writes} as cur (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value,
                                  task_path, run_id, epoch)
  select $3, $4, $5, $6, x.idx, x.channel, x.type, decode(x.value, 'base64'), $7, ok.id, ok.epoch
    from ok, jsonb_to_recordset($8::jsonb) as x(idx int, channel text, type text, value text)
  on conflict (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) do update
     set channel = excluded.channel, type = excluded.type, value = excluded.value, task_path = excluded.task_path,
         run_id = excluded.run_id, epoch = excluded.epoch
   where cur.idx < 0
  returning 1
), ${journalCte(t, '$9')}
${fenced ? GUARD_COUNTS : UNFENCED_COUNTS}`;
}

/**
 * The journal alone: $3 thread, $4 entries, and inside a run $5 share (`writeJournal`: a model answer
 * made durable before its node acts on it).
 */
export function journalWriteSql(t: SaverTables, fenced: boolean): string {
  return `with ${guardCtes(t, fenced, '$5')},
${journalCte(t, '$4')}
${fenced ? GUARD_COUNTS : UNFENCED_COUNTS}`;
}

/**
 * deleteThread: $3 thread, and inside a run $4 share. Inside a run, a thread of another run is kept
 * unless shared; a thread no run owns is deleted (it claims nothing: there is nothing left to own).
 */
export function deleteThreadSql(t: SaverTables, fenced: boolean): string {
  const gone = (table: string) =>
    `delete from ${table} where thread_id = $3 and exists (select 1 from ok) returning 1`;
  return `with ${guardCtes(t, fenced, '$4', false)},
dc as (${gone(t.checkpoints)}),
db as (${gone(t.blobs)}),
dw as (${gone(t.writes)}),
dj as (${gone(t.journal)}),
dt as (${gone(t.threads)})
${fenced ? GUARD_COUNTS : UNFENCED_COUNTS}`;
}

/** Rows of a statement's result, from `pg` (`{ rows }`) or TypeORM (an array). */
export async function rowsOf<R>(db: SaverQueryable, text: string, values: unknown[]): Promise<R[]> {
  const out = (await db.query(text, values)) as R[] | { rows: R[] };
  return Array.isArray(out) ? out : out.rows;
}

/**
 * Runs a write: refused with `LeaseLostError` when fenced and the claim no longer holds the run, with
 * `ForeignThreadError` when the thread is another run's and not shared (`share`). A write that lost the
 * race for a new thread (it saw no owner, and inserted none) runs again: the winner may be its own run.
 */
export async function runWrite(
  db: SaverQueryable,
  text: string,
  fence: SaverFence | undefined,
  values: unknown[],
  guard: { threadId: string; share: boolean; during: string },
): Promise<void> {
  const params = [fence?.runId ?? null, fence?.epoch ?? null, ...values, ...(fence ? [guard.share] : [])];
  for (let attempt = 0; ; attempt++) {
    const [row] = await rowsOf<{ n: number; ok: number; owners: number }>(db, text, params);
    if (!fence) return;
    if (!row?.n) throw new LeaseLostError(fence.runId, fence.epoch, guard.during);
    if (row.ok) return;
    if (row.owners || attempt > 0) throw new ForeignThreadError(guard.threadId, fence.runId, 'write');
  }
}

/** Base64 of serialised bytes (the statements decode it into bytea). */
export const b64 = (bytes: Uint8Array): string => Buffer.from(bytes).toString('base64');
