import { MigrationInterface, QueryRunner } from 'typeorm';
import { durableNames } from '../src/store/durable-names';

/**
 * A child's end reaches a RUNNING parent at once (issue 35): the `ai_run_ended` trigger now also
 * notifies the wake channel with `$signal:<parent id>` when the parent is running, as a signal sent to
 * it does, so the worker running it settles its pending waits (`Promise.race([step(), ctx.child(...)])`
 * resolves when the child ends, not at the parent's next heartbeat). A waiting parent is woken as before.
 */
export class ChildEndHint1766900000000 implements MigrationInterface {
  name = 'ChildEndHint1766900000000';
  /** The PostgreSQL schema of the tables (see `durableExecutionMigrations`); unset: unqualified names. */
  schema?: string;

  public async up(q: QueryRunner): Promise<void> {
    await q.query(runEnded(durableNames(this.schema), true));
  }

  public async down(q: QueryRunner): Promise<void> {
    await q.query(runEnded(durableNames(this.schema), false));
  }
}

/** The trigger function as 1765500000000 made it, plus the running parent's hint when `hint`. */
function runEnded(t: ReturnType<typeof durableNames>, hint: boolean): string {
  const running = hint
    ? `
            elsif p.status = 'running' then
              perform pg_notify('${t.wakeChannel}', '$signal:' || p.id);`
    : '';
  return `
      create or replace function ${t.prefix}ai_run_ended() returns trigger language plpgsql as $fn$
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
              perform pg_notify('${t.wakeChannel}', p.kind);${running}
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
      $fn$`;
}
