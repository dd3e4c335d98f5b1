import { Client } from 'pg';

/** A column as a writer meets it. */
export interface Column {
  type: string;
  notNull: boolean;
  /** The default expression, an identity (`identity`) or a generated column (`generated`); null: none. */
  default: string | null;
}

/** A constraint: its type (`c` check, `f` foreign key, `u` unique, `p` primary key, `x` exclusion). */
export interface Constraint {
  type: string;
  def: string;
  validated: boolean;
  columns: string[];
}

export interface Index {
  oid: number;
  unique: boolean;
  nullsNotDistinct: boolean;
  /** Key columns by name; an expression key counts as `(expr)`. */
  columns: string[];
  predicate: string | null;
  def: string;
}

export interface Trigger {
  def: string;
  /** Columns of `UPDATE OF ...`; empty: any update. */
  updateOf: string[];
  insert: boolean;
  update: boolean;
  delete: boolean;
  truncate: boolean;
  /** The WHEN condition, as pg_get_triggerdef writes it (`new.x`, `old.x`); null: none. */
  when: string | null;
}

export interface Table {
  oid: number;
  relfilenode: number;
  columns: Record<string, Column>;
  constraints: Record<string, Constraint>;
  indexes: Record<string, Index>;
  triggers: Record<string, Trigger>;
}

/** The tables of one schema (`public` by default), as the catalog has them. */
export type Catalog = Record<string, Table>;

/** Reads the tables of `schema` with their columns, constraints, indexes and triggers. */
export async function readCatalog(c: Client, schema = 'public'): Promise<Catalog> {
  const out: Catalog = {};
  const ns = `c.relnamespace = to_regnamespace($1) and c.relkind in ('r', 'p')`;
  for (const r of (
    await c.query(
      `select c.oid::int, c.relname, c.relfilenode::int from pg_class c where ${ns} order by c.relname`,
      [schema],
    )
  ).rows)
    out[r.relname] = {
      oid: r.oid,
      relfilenode: r.relfilenode,
      columns: {},
      constraints: {},
      indexes: {},
      triggers: {},
    };
  const rows = async (sql: string) => (await c.query(sql, [schema])).rows;
  for (const r of await rows(
    `select c.relname, a.attname, format_type(a.atttypid, a.atttypmod) as type, a.attnotnull,
            case when a.attidentity <> '' then 'identity' when a.attgenerated <> '' then 'generated'
                 else pg_get_expr(d.adbin, d.adrelid) end as dflt
       from pg_attribute a join pg_class c on c.oid = a.attrelid
       left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
      where ${ns} and a.attnum > 0 and not a.attisdropped`,
  ))
    out[r.relname].columns[r.attname] = { type: r.type, notNull: r.attnotnull, default: r.dflt };
  for (const r of await rows(
    `select c.relname, k.conname, k.contype, pg_get_constraintdef(k.oid) as def, k.convalidated,
            array(select a.attname from pg_attribute a
                   where a.attrelid = k.conrelid and a.attnum = any(k.conkey) order by a.attnum)::text[] as cols
       from pg_constraint k join pg_class c on c.oid = k.conrelid where ${ns}`,
  ))
    out[r.relname].constraints[r.conname] = {
      type: r.contype,
      def: r.def,
      validated: r.convalidated,
      columns: r.cols,
    };
  for (const r of await rows(
    `select c.relname, i.relname as index, i.oid::int, x.indisunique, x.indnullsnotdistinct,
            pg_get_indexdef(x.indexrelid) as def, pg_get_expr(x.indpred, x.indrelid) as pred,
            array(select coalesce(a.attname, '(expr)') from unnest(x.indkey[0:x.indnkeyatts - 1]) k(n)
                    left join pg_attribute a on a.attrelid = x.indrelid and a.attnum = k.n)::text[] as cols
       from pg_index x join pg_class c on c.oid = x.indrelid join pg_class i on i.oid = x.indexrelid
      where ${ns}`,
  ))
    out[r.relname].indexes[r.index] = {
      oid: r.oid,
      unique: r.indisunique,
      nullsNotDistinct: r.indnullsnotdistinct,
      columns: r.cols,
      predicate: r.pred,
      def: r.def,
    };
  for (const r of await rows(
    `select c.relname, t.tgname, pg_get_triggerdef(t.oid) as def, t.tgtype::int,
            array(select a.attname from pg_attribute a
                   where a.attrelid = t.tgrelid and a.attnum = any(t.tgattr))::text[] as cols
       from pg_trigger t join pg_class c on c.oid = t.tgrelid where ${ns} and not t.tgisinternal`,
  )) {
    // tgtype bits: 4 insert, 8 delete, 16 update, 32 truncate.
    const when = /\bWHEN \((.*)\) EXECUTE (?:FUNCTION|PROCEDURE)\b/s.exec(r.def);
    out[r.relname].triggers[r.tgname] = {
      def: r.def,
      updateOf: r.cols,
      insert: (r.tgtype & 4) !== 0,
      delete: (r.tgtype & 8) !== 0,
      update: (r.tgtype & 16) !== 0,
      truncate: (r.tgtype & 32) !== 0,
      when: when ? when[1] : null,
    };
  }
  return out;
}
