import { InvalidArgumentError, LeaseLostError } from '../index';

/**
 * The statements of `DurablePostgresSaver`, on the tables of migration 1766950000000 in the module's
 * schema. Every write is one statement whose first CTE, `fence`, decides: inside a durable run it is the
 * run's row locked only if the run is still `running` under the claim's epoch on the server's current
 * timeline (the test every fenced write of the engine makes); outside a run, one unconditional row.
 * Every insert reads `fence`, so a claim that was superseded writes nothing and gets no row back.
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
  };
}

/** The WAL timeline of the server (as the engine's fence compares it with the claim's). */
const CURRENT_TIMELINE = `('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int`;

/** The `fence` CTE, binding $1 (run id) and $2 (epoch). */
function fenceCte(t: SaverTables, fenced: boolean): string {
  return fenced
    ? `fence as (
  select id, epoch from ${t.runs}
   where id = $1::uuid and epoch = $2::int and status = 'running' and timeline = ${CURRENT_TIMELINE}
   for no key update
)`
    : `fence as (select $1::uuid as id, $2::int as epoch)`;
}

/** The journal upsert CTE (`jr`) for $3 thread and `param` entries (null: none); it only ever grows. */
function journalCte(t: SaverTables, param: string): string {
  return `jr as (
  insert into ${t.journal} as j (thread_id, run_id, epoch, entries)
  select $3, fence.id, fence.epoch, ${param}::jsonb from fence where ${param}::jsonb is not null and fence.id is not null
  on conflict (thread_id) do update
     set entries = excluded.entries, epoch = excluded.epoch, run_id = excluded.run_id, updated_at = now()
   where jsonb_array_length(excluded.entries) >= jsonb_array_length(j.entries)
  returning 1
)`;
}

/** put: $3 thread, $4 ns, $5 id, $6 parent id, $7 type, $8 checkpoint, $9 meta type, $10 meta, $11 blobs, $12 journal. */
export function putSql(t: SaverTables, fenced: boolean): string {
  return `with ${fenceCte(t, fenced)},
cp as (
  insert into ${t.checkpoints} (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint,
                                metadata_type, metadata, run_id, epoch)
  select $3, $4, $5, $6, $7, decode($8, 'base64'), $9, decode($10, 'base64'), fence.id, fence.epoch from fence
  on conflict (thread_id, checkpoint_ns, checkpoint_id) do update
     set parent_checkpoint_id = excluded.parent_checkpoint_id, type = excluded.type, checkpoint = excluded.checkpoint,
         metadata_type = excluded.metadata_type, metadata = excluded.metadata, run_id = excluded.run_id,
         epoch = excluded.epoch
  returning 1
), bl as (
  insert into ${t.blobs} (thread_id, checkpoint_ns, channel, version, type, blob)
  select $3, $4, b.channel, b.version, b.type, decode(b.blob, 'base64')
    from fence, jsonb_to_recordset($11::jsonb) as b(channel text, version text, type text, blob text)
  on conflict (thread_id, checkpoint_ns, channel, version) do nothing
  returning 1
), ${journalCte(t, '$12')}
select count(*)::int as n from fence`;
}

/**
 * putWrites: $3 thread, $4 ns, $5 checkpoint id, $6 task id, $7 task path, $8 writes, $9 journal. A
 * regular write (idx >= 0) already stored is kept; a special one (error, interrupt, resume: idx < 0)
 * is replaced, as LangGraph's in-memory saver does.
 */
export function putWritesSql(t: SaverTables, fenced: boolean): string {
  return `with ${fenceCte(t, fenced)},
w as (
  insert into ${t.writes} as cur (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value,
                                  task_path, run_id, epoch)
  select $3, $4, $5, $6, x.idx, x.channel, x.type, decode(x.value, 'base64'), $7, fence.id, fence.epoch
    from fence, jsonb_to_recordset($8::jsonb) as x(idx int, channel text, type text, value text)
  on conflict (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) do update
     set channel = excluded.channel, type = excluded.type, value = excluded.value, task_path = excluded.task_path,
         run_id = excluded.run_id, epoch = excluded.epoch
   where cur.idx < 0
  returning 1
), ${journalCte(t, '$9')}
select count(*)::int as n from fence`;
}

/** deleteThread: $3 thread. */
export function deleteThreadSql(t: SaverTables, fenced: boolean): string {
  return `with ${fenceCte(t, fenced)},
dc as (delete from ${t.checkpoints} where thread_id = $3 and exists (select 1 from fence) returning 1),
db as (delete from ${t.blobs} where thread_id = $3 and exists (select 1 from fence) returning 1),
dw as (delete from ${t.writes} where thread_id = $3 and exists (select 1 from fence) returning 1),
dj as (delete from ${t.journal} where thread_id = $3 and exists (select 1 from fence) returning 1)
select count(*)::int as n from fence`;
}

/** Rows of a statement's result, from `pg` (`{ rows }`) or TypeORM (an array). */
export async function rowsOf<R>(db: SaverQueryable, text: string, values: unknown[]): Promise<R[]> {
  const out = (await db.query(text, values)) as R[] | { rows: R[] };
  return Array.isArray(out) ? out : out.rows;
}

/** Runs a write: refused with `LeaseLostError` when fenced and the claim no longer holds the run. */
export async function runWrite(
  db: SaverQueryable,
  text: string,
  fence: SaverFence | undefined,
  values: unknown[],
  during: string,
): Promise<void> {
  const [row] = await rowsOf<{ n: number }>(db, text, [
    fence?.runId ?? null,
    fence?.epoch ?? null,
    ...values,
  ]);
  if (fence && !row?.n) throw new LeaseLostError(fence.runId, fence.epoch, during);
}

/** Base64 of serialised bytes (the statements decode it into bytea). */
export const b64 = (bytes: Uint8Array): string => Buffer.from(bytes).toString('base64');
