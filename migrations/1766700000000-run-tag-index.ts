import { MigrationInterface, QueryRunner } from 'typeorm';
import { durableNames } from '../src/store/durable-names';

/**
 * A tag search that reads the newest page only (issue 38): `ai_run_tags` holds one row per tag of a
 * run (`{"tenant": "acme"}` as its jsonb text), keyed `(tag, created_at, run_id)`, so
 * `list({ tags: { tenant } })` walks one tag's runs newest first and stops at the page's end, where the
 * GIN index (`ai_runs_tags_idx`, kept for containment of several tags) fetched every run of the tenant
 * and sorted them. A trigger keeps it: on insert of a run with tags and on every update that sets
 * `tags` (start, a debounced start's update, a child's start, `ctx.setTags`); no statement on the step
 * path sets `tags`, so none pays for it. A deleted run takes its rows with it (cascade).
 */
export class RunTagIndex1766700000000 implements MigrationInterface {
  name = 'RunTagIndex1766700000000';
  /** The PostgreSQL schema of the tables (see `durableExecutionMigrations`); unset: unqualified names. */
  schema?: string;

  public async up(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`
      create table ${t.runTags} (
        tag        text not null,
        created_at timestamptz not null,
        run_id     uuid not null references ${t.runs}(id) on delete cascade,
        primary key (tag, created_at, run_id)
      )`);
    await q.query(`create index ai_run_tags_run_idx on ${t.runTags} (run_id)`);
    await q.query(`
      create function ${t.prefix}ai_run_tags_sync() returns trigger language plpgsql as $fn$
      begin
        if tg_op = 'UPDATE' then
          if new.tags is not distinct from old.tags then return null; end if;
          delete from ${t.runTags} where run_id = new.id;
        end if;
        insert into ${t.runTags} (tag, created_at, run_id)
        select jsonb_build_object(e.key, e.value)::text, new.created_at, new.id
          from jsonb_each(coalesce(new.tags, '{}'::jsonb)) e
        on conflict do nothing;
        return null;
      end $fn$`);
    await q.query(`
      create trigger ai_run_tags_insert after insert on ${t.runs}
        for each row when (new.tags is not null)
        execute function ${t.prefix}ai_run_tags_sync()`);
    await q.query(`
      create trigger ai_run_tags_update after update of tags on ${t.runs}
        for each row execute function ${t.prefix}ai_run_tags_sync()`);
    await q.query(`
      insert into ${t.runTags} (tag, created_at, run_id)
      select jsonb_build_object(e.key, e.value)::text, r.created_at, r.id
        from ${t.runs} r cross join lateral jsonb_each(r.tags) e
       where r.tags is not null`);
  }

  public async down(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`drop trigger ai_run_tags_update on ${t.runs}`);
    await q.query(`drop trigger ai_run_tags_insert on ${t.runs}`);
    await q.query(`drop function ${t.prefix}ai_run_tags_sync()`);
    await q.query(`drop table ${t.runTags}`);
  }
}
