import { MigrationInterface, QueryRunner } from 'typeorm';
import { durableNames } from '../src/store/durable-names';

type Names = ReturnType<typeof durableNames>;

/** Weeks of partitions made ahead of the current one (maintenance makes more as time passes). */
const WEEKS_AHEAD = 4;

/**
 * History that grows (issue 38): `ai_events` becomes a table partitioned by RANGE on `created_at`, one
 * partition a week (Monday 00:00 UTC), so retention can drop a week whose runs are all past it instead
 * of deleting its rows one run at a time. The table there is kept as it is: renamed
 * `ai_events_legacy` and attached as the first partition, holding everything before the next week's
 * start (no row is copied; ATTACH scans it once to check the bound, and the new primary key
 * `(id, created_at)` is built on it: the partition key must be in it). Its indexes `(run_id, id)` and
 * `(created_at)` are reused as the partitioned ones' partitions. Ids go on from the old sequence (the
 * new identity starts after its last value). `ai_events_default` takes any row no partition covers, so
 * an insert never fails when maintenance falls behind. The foreign key to `ai_runs` (ON DELETE CASCADE)
 * and the table's grants are recreated on the parent. The trigger function `ai_run_ended` inserts by
 * name (PL/pgSQL plans again after DDL), as does every statement. `ai_checkpoints` stays as it is.
 * down() copies the rows back into one plain table of the original shape (ids kept).
 */
export class PartitionedEvents1767000000000 implements MigrationInterface {
  name = 'PartitionedEvents1767000000000';
  /** The PostgreSQL schema of the tables (see `durableExecutionMigrations`); unset: unqualified names. */
  schema?: string;

  public async up(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    const p = t.prefix;
    // Both tables it ends up holding, up front and in the order every statement of a running worker takes
    // them (ai_runs, then ai_events): taken one after the other, a worker's claim or step commit holding
    // ai_runs and waiting for ai_events deadlocks with it (test/upgrade, migrating under 0.2.0 workers).
    await q.query(`lock table ${t.runs}, ${t.events} in access exclusive mode`);
    const [{ triggers }] = await q.query(
      `select count(*)::int as triggers from pg_trigger where tgrelid = '${t.events}'::regclass and not tgisinternal`,
    );
    if (triggers) throw new Error(`${t.label('ai_events')} has triggers of its own: drop them first`);
    const next = await nextId(q, t);
    const keep = await grantsAndOwner(q, t);
    const [{ bound }] = await q.query(
      `select to_char(date_trunc('week', greatest(now(), coalesce(max(created_at), now())) at time zone 'UTC')
                      + interval '7 days', 'YYYY-MM-DD HH24:MI:SS"+00"') as bound from ${t.events}`,
    );
    const constraints: { conname: string; contype: string }[] = await q.query(
      `select conname, contype from pg_constraint where conrelid = '${t.events}'::regclass and contype in ('p', 'f')`,
    );
    await q.query(`alter table ${t.events} rename to ai_events_legacy`);
    const legacy = `${p}ai_events_legacy`;
    await q.query(`alter index if exists ${p}ai_events_run_idx rename to ai_events_legacy_run_idx`);
    await q.query(`alter index if exists ${p}ai_events_created_idx rename to ai_events_legacy_created_idx`);
    for (const c of constraints) {
      await q.query(
        c.contype === 'p'
          ? `alter table ${legacy} drop constraint "${c.conname}"`
          : `alter table ${legacy} rename constraint "${c.conname}" to ai_events_legacy_run_id_fkey`,
      );
    }
    await q.query(`alter table ${legacy} alter column id drop identity if exists`);
    await q.query(`
      create table ${t.events} (
        id         bigint generated always as identity (start with ${next}),
        run_id     uuid not null references ${t.runs}(id) on delete cascade,
        event_type text not null,
        epoch      bigint not null default 0,
        payload    jsonb not null default '{}'::jsonb,
        created_at timestamptz not null default now(),
        primary key (id, created_at)
      ) partition by range (created_at)`);
    await q.query(
      `alter table ${t.events} attach partition ${legacy} for values from (minvalue) to ('${bound}')`,
    );
    await q.query(`create table ${p}ai_events_default partition of ${t.events} default`);
    await q.query(`
      do $do$
      declare
        lo timestamptz;
      begin
        for i in 0..${WEEKS_AHEAD - 1} loop
          lo := '${bound}'::timestamptz + i * interval '7 days';
          execute format('create table %s partition of ${t.events} for values from (%L) to (%L)',
                         '${p}' || quote_ident('ai_events_p' || to_char(lo at time zone 'UTC', 'YYYYMMDD')),
                         lo, lo + interval '7 days');
        end loop;
      end
      $do$`);
    await q.query(`create index ai_events_run_idx on ${t.events} (run_id, id)`);
    await q.query(`create index ai_events_created_idx on ${t.events} (created_at)`);
    for (const sql of keep) await q.query(sql);
  }

  public async down(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    const p = t.prefix;
    await q.query(`lock table ${t.runs}, ${t.events} in access exclusive mode`); // as up() does
    const next = await nextId(q, t);
    const keep = await grantsAndOwner(q, t);
    await q.query(`
      create table ${p}ai_events_flat (
        id         bigint generated always as identity (start with ${next}) primary key,
        run_id     uuid not null references ${t.runs}(id) on delete cascade,
        event_type text not null,
        epoch      bigint not null default 0,
        payload    jsonb not null default '{}'::jsonb,
        created_at timestamptz not null default now()
      )`);
    const cols = 'id, run_id, event_type, epoch, payload, created_at';
    await q.query(
      `insert into ${p}ai_events_flat (${cols}) overriding system value select ${cols} from ${t.events} order by id`,
    );
    await q.query(`drop table ${t.events}`);
    await q.query(`alter table ${p}ai_events_flat rename to ai_events`);
    await q.query(`alter table ${t.events} rename constraint ai_events_flat_pkey to ai_events_pkey`);
    await q.query(
      `alter table ${t.events} rename constraint ai_events_flat_run_id_fkey to ai_events_run_id_fkey`,
    );
    await q.query(`alter sequence ${p}ai_events_flat_id_seq rename to ai_events_id_seq`);
    await q.query(`create index ai_events_run_idx on ${t.events} (run_id, id)`);
    await q.query(`create index ai_events_created_idx on ${t.events} (created_at)`);
    for (const sql of keep) await q.query(sql);
  }
}

/** The id the next event gets: after the identity's last value (and after every id there). */
async function nextId(q: QueryRunner, t: Names): Promise<string> {
  const [{ next }] = await q.query(
    `select greatest(
              (select coalesce(s.last_value + 1, s.start_value) from pg_sequences s
                where format('%I.%I', s.schemaname, s.sequencename) = pg_get_serial_sequence('${t.events}', 'id')),
              (select max(id) + 1 from ${t.events}), 1)::text as next`,
  );
  return next;
}

/** The statements that give the table's grants (and owner) again to the table made in its place. */
async function grantsAndOwner(q: QueryRunner, t: Names): Promise<string[]> {
  const rows: { sql: string }[] = await q.query(
    `select format('grant %s on ${t.events} to %s%s', a.privilege_type,
                   case when a.grantee = 0 then 'public' else quote_ident(pg_get_userbyid(a.grantee)) end,
                   case when a.is_grantable then ' with grant option' else '' end) as sql
       from pg_class c cross join lateral aclexplode(c.relacl) a
      where c.oid = '${t.events}'::regclass and a.grantee <> c.relowner
     union all
     select format('alter table ${t.events} owner to %I', pg_get_userbyid(c.relowner))
       from pg_class c where c.oid = '${t.events}'::regclass and c.relowner <> (select oid from pg_roles where rolname = current_user)`,
  );
  return rows.map((r) => r.sql);
}
