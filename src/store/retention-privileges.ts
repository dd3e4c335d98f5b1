import { DurableDatabase } from './durable-database';

/**
 * What the connected role lacks for retention, from the catalog only (nothing is tried): one row per
 * missing privilege, by scope. `prune` and `deleteRuns` are the table privileges of the statements of
 * retention.store.ts, given as arrays ($1 scopes, $2 tables, $3 privileges, $4 labels); `partitions`, when ai_events
 * ($5, labelled $6) is partitioned: CREATE on the schema new weeks are made in ($7, null: the
 * connection's current schema) and ownership of ai_events (ATTACH PARTITION) to make weeks, ownership of
 * each partition to drop one (DROP TABLE needs the owner, not a grant).
 */
export const RETENTION_PRIVILEGES_SQL = `
select n.scope, n.priv || ' on ' || n.label as missing
  from unnest($1::text[], $2::text[], $3::text[], $4::text[]) as n(scope, tbl, priv, label)
 where not has_table_privilege(n.tbl, n.priv)
union all
select 'partitions', x.missing
  from pg_class c
 cross join lateral (values
   (case when not has_schema_privilege(coalesce($7::text, current_schema()), 'CREATE')
         then 'CREATE on schema ' || coalesce($7::text, current_schema()) end),
   (case when not pg_has_role(c.relowner, 'USAGE') then 'ownership of ' || $6::text end),
   ((select 'ownership of ' || count(*) || ' partition(s) of ' || $6::text
       from pg_inherits i join pg_class p on p.oid = i.inhrelid
      where i.inhparent = c.oid and not pg_has_role(p.relowner, 'USAGE')
     having count(*) > 0))
 ) as x(missing)
 where c.oid = to_regclass($5::text) and c.relkind = 'p' and x.missing is not null`;

/** What the role lacks for each part of retention (`RETENTION_PRIVILEGES_SQL`), e.g. `DELETE on ai_events`. */
export interface RetentionPrivileges {
  prune: string[];
  deleteRuns: string[];
  partitions: string[];
}

type Scope = keyof RetentionPrivileges;
type Table = 'runs' | 'commands' | 'checkpoints' | 'events' | 'signals' | 'stream';

/** The privileges each part of retention needs, on which of the module's tables. */
const NEEDED: Array<[Scope, Table, string]> = [
  ['prune', 'runs', 'SELECT'],
  ['prune', 'runs', 'UPDATE'],
  ['prune', 'commands', 'SELECT'],
  ...(['checkpoints', 'events', 'signals', 'stream'] as const).flatMap((k) =>
    ['SELECT', 'DELETE'].map((p): [Scope, Table, string] => ['prune', k, p]),
  ),
  ['prune', 'events', 'INSERT'],
  ['deleteRuns', 'runs', 'DELETE'],
];

/** What the role `db` connects as lacks for retention (catalog reads only). @internal */
export async function missingRetentionPrivileges(db: DurableDatabase): Promise<RetentionPrivileges> {
  const t = db.names;
  const label = (k: string) => t.label(`ai_${k === 'stream' ? 'run_stream' : k}`);
  const { rows } = await db.query(RETENTION_PRIVILEGES_SQL, [
    NEEDED.map((n) => n[0]),
    NEEDED.map((n) => t[n[1]]),
    NEEDED.map((n) => n[2]),
    NEEDED.map((n) => label(n[1])),
    t.events,
    t.label('ai_events'),
    t.schema ?? null,
  ]);
  const out: RetentionPrivileges = { prune: [], deleteRuns: [], partitions: [] };
  for (const r of rows as Array<{ scope: Scope; missing: string }>) out[r.scope].push(r.missing);
  return out;
}
