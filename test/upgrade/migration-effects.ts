import { DataSource, MigrationInterface, QueryRunner } from 'typeorm';
import type { Catalog } from './catalog';

/**
 * What one migration did to the tables of the previous release (by oid: a table renamed by the migration
 * is still the one old workers wrote), read inside its own transaction just before the commit: the locks
 * it holds there (until the commit) and the work whose time grows with a table while that lock keeps old
 * workers waiting.
 */
export interface MigrationEffect {
  name: string;
  /** Wall time of `up()` and the commit, in ms. */
  ms: number;
  /** false: the migration runs outside a transaction (`transaction = false`, e.g. CREATE INDEX CONCURRENTLY). */
  transaction: boolean;
  /** The strongest lock held at the end on each previous-release table, by its name in that release. */
  locks: Record<string, string>;
  /** Tables rewritten (a new relfilenode: ALTER ... TYPE, a volatile default, VACUUM FULL, CLUSTER). */
  rewritten: string[];
  /** Indexes built on a previous-release table inside the transaction (not CONCURRENTLY): `table.index`. */
  indexesBuilt: string[];
  /** Constraints added to a previous-release table and validated at once (not NOT VALID): `table.name`. */
  validated: string[];
  /** Columns the previous release had that became NOT NULL (a scan under ACCESS EXCLUSIVE): `table.column`. */
  notNullSet: string[];
  /** Rows inserted, updated or deleted in previous-release tables (a backfill): table → rows. */
  rowsWritten: Record<string, number>;
  /** Rows read from previous-release tables it holds a lock on that stops writers: table → rows. */
  rowsReadLocked: Record<string, number>;
}

/** Lock modes that keep an old worker's INSERT/UPDATE/DELETE (ROW EXCLUSIVE) waiting. */
export const BLOCKS_WRITERS = ['ShareLock', 'ShareRowExclusiveLock', 'ExclusiveLock', 'AccessExclusiveLock'];
const STRENGTH = ['AccessShareLock', 'RowShareLock', 'RowExclusiveLock', 'ShareUpdateExclusiveLock'].concat(
  BLOCKS_WRITERS,
);

/** The tables whose work grows with them under a lock that stops old writers: table names. */
export function heavyTables(e: MigrationEffect): string[] {
  const touched = new Set([
    ...e.rewritten,
    ...e.indexesBuilt.map((x) => x.split('.')[0]),
    ...e.validated.map((x) => x.split('.')[0]),
    ...e.notNullSet.map((x) => x.split('.')[0]),
    ...Object.keys(e.rowsWritten),
    ...Object.keys(e.rowsReadLocked),
  ]);
  return [...touched].sort();
}

type MigrationClass = new () => MigrationInterface & { name?: string };

/**
 * Applies `migrations` in order on the database of `url` (each in its own transaction unless it says
 * `transaction = false`, as `runDurableMigrations` does), recording each one's effect on the tables of
 * `before` (the previous release's catalog). Nothing is recorded in ai_migrations: the database is the
 * check's own.
 */
export async function applyObserved(
  url: string,
  before: Catalog,
  migrations: MigrationClass[],
): Promise<MigrationEffect[]> {
  const ds = new DataSource({ type: 'postgres', url, poolSize: 1 });
  await ds.initialize();
  const q = ds.createQueryRunner();
  const byOid = new Map(Object.entries(before).map(([name, t]) => [t.oid, name]));
  const oids = [...byOid.keys()];
  try {
    const out: MigrationEffect[] = [];
    for (const M of migrations) {
      const m = new M();
      const inTx = (m as { transaction?: boolean }).transaction !== false;
      const snap = await snapshot(q, oids);
      const t0 = performance.now();
      if (inTx) await q.startTransaction();
      await m.up(q);
      const end = inTx ? await snapshot(q, oids) : undefined;
      if (inTx) await q.commitTransaction();
      const ms = performance.now() - t0;
      const after = end ?? (await snapshot(q, oids));
      const name = (m.name ?? M.name) as string;
      out.push(effectOf(name, inTx, ms, snap, after, byOid, before));
    }
    return out;
  } finally {
    await q.release();
    await ds.destroy();
  }
}

interface Snapshot {
  relfilenode: Map<number, number>;
  indexes: Map<number, { table: number; name: string }>;
  constraints: Map<number, { table: number; name: string; validated: boolean; type: string }>;
  notNull: Map<string, boolean>;
  locks: Map<number, string>;
  written: Map<number, number>;
  read: Map<number, number>;
}

async function snapshot(q: QueryRunner, oids: number[]): Promise<Snapshot> {
  const rows = (sql: string) => q.query(sql, [oids]) as Promise<any[]>;
  const s: Snapshot = {
    relfilenode: new Map(),
    indexes: new Map(),
    constraints: new Map(),
    notNull: new Map(),
    locks: new Map(),
    written: new Map(),
    read: new Map(),
  };
  for (const r of await rows(`select oid::int, relfilenode::int from pg_class where oid = any($1)`))
    s.relfilenode.set(r.oid, r.relfilenode);
  for (const r of await rows(
    `select x.indexrelid::int as oid, x.indrelid::int as t, i.relname from pg_index x
       join pg_class i on i.oid = x.indexrelid where x.indrelid = any($1)`,
  ))
    s.indexes.set(r.oid, { table: r.t, name: r.relname });
  for (const r of await rows(
    `select oid::int, conrelid::int as t, conname, convalidated, contype from pg_constraint
      where conrelid = any($1)`,
  ))
    s.constraints.set(r.oid, { table: r.t, name: r.conname, validated: r.convalidated, type: r.contype });
  for (const r of await rows(
    `select attrelid::int as t, attname, attnotnull from pg_attribute
      where attrelid = any($1) and attnum > 0 and not attisdropped`,
  ))
    s.notNull.set(`${r.t}.${r.attname}`, r.attnotnull);
  for (const r of await rows(
    `select relation::int as t, mode from pg_locks
      where pid = pg_backend_pid() and granted and locktype = 'relation' and relation = any($1)`,
  )) {
    const had = s.locks.get(r.t);
    if (!had || STRENGTH.indexOf(r.mode) > STRENGTH.indexOf(had)) s.locks.set(r.t, r.mode);
  }
  for (const r of await rows(
    `select relid::int as t, (n_tup_ins + n_tup_upd + n_tup_del)::int as n,
            (coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0))::int as rd
       from pg_stat_xact_all_tables where relid = any($1)`,
  )) {
    s.written.set(r.t, r.n);
    s.read.set(r.t, r.rd);
  }
  return s;
}

function effectOf(
  name: string,
  transaction: boolean,
  ms: number,
  a: Snapshot,
  b: Snapshot,
  byOid: Map<number, string>,
  before: Catalog,
): MigrationEffect {
  const label = (oid: number) => byOid.get(oid)!;
  const e: MigrationEffect = {
    name,
    ms,
    transaction,
    locks: {},
    rewritten: [],
    indexesBuilt: [],
    validated: [],
    notNullSet: [],
    rowsWritten: {},
    rowsReadLocked: {},
  };
  for (const [oid, mode] of b.locks) e.locks[label(oid)] = mode;
  for (const [oid, node] of b.relfilenode) if (a.relfilenode.get(oid) !== node) e.rewritten.push(label(oid));
  if (transaction)
    for (const [oid, x] of b.indexes)
      if (!a.indexes.has(oid)) e.indexesBuilt.push(`${label(x.table)}.${x.name}`);
  for (const [oid, k] of b.constraints)
    if (k.validated && ['c', 'f'].includes(k.type) && !a.constraints.get(oid)?.validated)
      e.validated.push(`${label(k.table)}.${k.name}`);
  for (const [key, notNull] of b.notNull) {
    const [oid, column] = [Number(key.split('.')[0]), key.slice(key.indexOf('.') + 1)];
    if (notNull && a.notNull.get(key) === false && before[label(oid)]?.columns[column])
      e.notNullSet.push(`${label(oid)}.${column}`);
  }
  // The counters of transactions not yet flushed to the statistics (at most once a second) are in both
  // readings: the migration's own rows are the difference (or the second alone, after a flush).
  const delta = (now: number, was = 0) => (now >= was ? now - was : now);
  for (const [oid, n] of b.written) {
    const d = delta(n, a.written.get(oid));
    if (d > 0) e.rowsWritten[label(oid)] = d;
  }
  for (const [oid, n] of b.read) {
    const d = delta(n, a.read.get(oid));
    if (d > 0 && BLOCKS_WRITERS.includes(b.locks.get(oid) ?? '')) e.rowsReadLocked[label(oid)] = d;
  }
  return e;
}
