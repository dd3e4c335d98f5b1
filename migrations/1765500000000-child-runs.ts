import { MigrationInterface, QueryRunner } from 'typeorm';
import { durableNames } from '../src/store/durable-names';

/**
 * Child runs (`ctx.child`, `ctx.startChild`): `ai_runs.parent_id` (the run that started it, null for a
 * run started from outside), `parent_close` (what happens to the child when its parent ends first:
 * `cancel` or `abandon`) and `has_children` (set by the parent's first child start). A trigger on the
 * runs table, fired only when a run with a parent or with children reaches a terminal status, does in
 * that same statement what must never be missed: the child's end is stored as signal `$child:<id>` on
 * its parent (payload `{status, output, error}`), which wakes the parent if it waits and touches its row
 * if it runs (a wait that parks at that moment stays due); a parent's end cancels its `cancel`-policy children
 * not yet ended: one that never began ends `cancelled` at once, any other gets a cancel request and is
 * due at once (its worker stops it, running its `onCancel`) (rows another statement holds are skipped: the reconciler's
 * sweep requests theirs, so no statement ever waits on a child's row while holding its parent's).
 */
export class ChildRuns1765500000000 implements MigrationInterface {
  name = 'ChildRuns1765500000000';
  /** The PostgreSQL schema of the tables (see `durableExecutionMigrations`); unset: unqualified names. */
  schema?: string;

  public async up(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`
      alter table ${t.runs}
        add column parent_id uuid,
        add column parent_close text check (parent_close in ('cancel', 'abandon')),
        add column has_children boolean not null default false`);
    await q.query(`create index ai_runs_parent_idx on ${t.runs} (parent_id) where parent_id is not null`);
    await q.query(`
      create function ${t.prefix}ai_run_ended() returns trigger language plpgsql as $fn$
      declare
        p record;
      begin
        if new.parent_id is not null then
          update ${t.runs} r
             set available_at = case when r.status = 'waiting' then now() else r.available_at end,
                 updated_at = now()
           where r.id = new.parent_id
          returning r.id, r.kind, r.status, r.epoch into p;
          if found then
            insert into ${t.signals} (run_id, name, payload)
            values (p.id, '$child:' || new.id,
                    jsonb_build_object('status', new.status, 'output', new.output, 'error', new.error));
            insert into ${t.events} (run_id, event_type, epoch, payload)
            values (p.id, 'child.ended', p.epoch,
                    jsonb_build_object('child', new.id, 'kind', new.kind, 'status', new.status));
            if p.status = 'waiting' then
              perform pg_notify('${t.wakeChannel}', p.kind);
            end if;
          end if;
        end if;
        if new.has_children then
          with c as (
            update ${t.runs} c
               set status = case when c.status = 'pending' and c.epoch = 0 then 'cancelled' else c.status end,
                   finished_at = case when c.status = 'pending' and c.epoch = 0 then now() else c.finished_at end,
                   cancel_requested_at = now(),
                   cancel_reason = coalesce(c.cancel_reason, 'its parent run ended (' || new.status || ')'),
                   available_at = case when c.status = 'waiting' then now() else c.available_at end,
                   limited_by = null,
                   updated_at = now()
             where c.id in (select k.id from ${t.runs} k
                             where k.parent_id = new.id and k.parent_close = 'cancel'
                               and k.status in ('pending', 'running', 'waiting') and k.cancel_requested_at is null
                               for update skip locked)
            returning c.id, c.epoch, c.kind, c.status, c.notify_on_finish
          ), ev as (
            insert into ${t.events} (run_id, event_type, epoch, payload)
            select id, case when status = 'cancelled' then 'run.cancelled' else 'run.cancel_requested' end, epoch,
                   jsonb_build_object('reason', 'its parent run ended (' || new.status || ')', 'parent', new.id)
              from c
          )
          select count(pg_notify(case when status = 'cancelled' then '${t.doneChannel}' else '${t.wakeChannel}' end,
                                 case when status = 'cancelled' then id::text else kind end))
            into p from c where status <> 'cancelled' or notify_on_finish;
        end if;
        return null;
      end
      $fn$`);
    await q.query(`
      create trigger ai_run_ended after update of status on ${t.runs}
        for each row
        when ((new.parent_id is not null or new.has_children)
              and new.status in ('succeeded', 'failed', 'cancelled', 'dead_lettered')
              and old.status is distinct from new.status)
        execute function ${t.prefix}ai_run_ended()`);
  }

  public async down(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`drop trigger ai_run_ended on ${t.runs}`);
    await q.query(`drop function ${t.prefix}ai_run_ended()`);
    await q.query(`drop index ${t.prefix}ai_runs_parent_idx`);
    await q.query(
      `alter table ${t.runs} drop column parent_id, drop column parent_close, drop column has_children`,
    );
  }
}
