import type { SqlText } from '../durable-names';
import { closeUnsentCommands } from '../sql/close-unsent.sql';
import { CLEANUP_BASE } from '../run-state/cleanup-mark';
import { pinnedVersion } from '../sql/pinned-version.sql';
import { keyLimitRows, releaseSlots } from '../run-state/slots';
import { RECORD_FORMAT } from '../record-format';
import { runViewColumns } from '../run-row.mapper';

/** The lowest patch marker position (`patchIndex`): below it, sleeps' due times (`-2^30 - 1 - position`). */
const LOWEST_PATCH = -(2 ** 30);

/**
 * What a fork of run $1 is planned from, in one snapshot of it: the row (with its version, `xmin`, which
 * the fork's statement requires unchanged), its `run()` positions (index, name, delivery order and, for a
 * child's start, the child's id; never the outputs), its command rows (key, index, status) and the
 * children whose end is stored on it (their end signals). The cleanup's positions (`onCancel`, from
 * CLEANUP_BASE) are never inherited and not read.
 * $1 original id
 */
export const FORK_PLAN_SQL: SqlText = (t) => `
select r.id, r.kind, r.status, r.epoch, r.xmin::text as row_version, ${pinnedVersion('r')} as version,
       r.generation, r.cancel_requested_at is not null as cancel_requested,
       (select coalesce(jsonb_agg(jsonb_build_array(c.step_index, c.step_name, c.seq,
                 case when c.step_name like '$child:%' then c.output->>'runId' end) order by c.step_index),
                 '[]'::jsonb)
          from ${t.checkpoints} c where c.run_id = r.id and c.step_index >= 0 and c.step_index < ${CLEANUP_BASE}) as positions,
       (select coalesce(jsonb_agg(jsonb_build_array(m.idempotency_key, m.step_index, m.status, m.command_name)),
                 '[]'::jsonb)
          from ${t.commands} m where m.run_id = r.id and m.step_index < ${CLEANUP_BASE}) as commands,
       (select coalesce(jsonb_agg(distinct s.name), '[]'::jsonb)
          from ${t.signals} s where s.run_id = r.id and s.name like '$child:%') as child_ends
  from ${t.runs} r where r.id = $1`;

/**
 * A fork, in ONE statement: run $1 is locked only if its row is still the version the plan read (`$2`,
 * its `xmin`: every write of a run moves its row, so nothing it recorded since the plan is missed; else
 * nothing happens and the caller plans again); the fork is inserted (its origin in `forked_from`,
 * `fork_step`; the original's kind, version `$6` or its own, input `$5` or its own, attempts, priority,
 * key and tags; its epoch starts at the original's, so its first claim reads the record it inherits, and
 * the epochs the inherited rows carry stay below its own claims'); its key's slots made; the original's
 * checkpoints before position $3 copied to it (the values and waits among them, every patch marker, the
 * due times of sleeps before $3; the result at `$7` replaced by `$8`), never a reference: retention
 * prunes the original by its own rules; the end signals `$14` of children it inherits the start of but
 * not the wait for copied as unconsumed signals; `run.created` on the fork and `run.forked` on the
 * original. With `$4 = 'cancel'` the original, when not ended, ends `cancelled` in the same statement:
 * its epoch raised when a worker holds it (that worker's next write, heartbeat or renewal fails), its
 * unsent commands closed, its pending ones in doubt, its slots freed, `run.cancelled` with the fork's id;
 * the fork is then due at the end of the original's lease, when nothing the old owner started can still
 * act (its wire gate refuses from its local deadline on). Nothing of the fork's is written into the
 * original's rows. An idempotency key `$9` another run holds inserts nothing (and cancels nothing).
 * The fork's record format is the original's or RECORD_FORMAT, the later: it holds the original's records.
 * The fork's columns come back named (RUN_VIEW_COLUMNS), never `fork.*`: a named statement's result must
 * not change with the table's.
 * $1 original id, $2 its row version, $3 fork step, $4 'leave' | 'cancel', $5 input (null: the
 * original's), $6 version, $7 edited index (null: none), $8 edited output, $9 idempotency key,
 * $10 `run.created` payload, $11 `run.forked` payload, $12 cancel reason, $13 `run.cancelled` payload,
 * $14 child end signal names, $15 wake channel, $16 keep the original's keys (`keys_from`: the key prefix
 * the fork's commands send under: the one the original sent under)
 */
export const FORK_RUN_SQL: SqlText = (t) => `
with orig as (
  select r.id, r.kind, r.status, r.epoch, r.input, r.max_attempts, r.priority, r.concurrency_key, r.tags,
         r.lease_expires_at, r.record_format, r.generation, r.keys_from
    from ${t.runs} r where r.id = $1 and r.xmin::text = $2
     for update
), fork as (
  insert into ${t.runs} (kind, kind_version, input, idempotency_key, max_attempts, available_at, priority,
                         concurrency_key, tags, epoch, forked_from, fork_step, record_format, keys_from)
  select o.kind, $6, coalesce($5::jsonb, o.input), $9, o.max_attempts,
         case when $4::text = 'cancel' and o.status = 'running' then greatest(o.lease_expires_at, now()) else now() end,
         o.priority, o.concurrency_key, o.tags, o.epoch, o.id, $3, greatest(o.record_format, ${RECORD_FORMAT}),
         case when $16::boolean
              then coalesce(o.keys_from, 'run_' || o.id || case when o.generation > 0 then ':g' || o.generation else '' end)
         end
    from orig o
  on conflict (idempotency_key) do nothing
  returning *
), ${keyLimitRows(t, 'fork')}, ended as (
  update ${t.runs} r
     set status = 'cancelled', epoch = r.epoch + case when r.status = 'running' then 1 else 0 end,
         worker_id = null, lease_expires_at = null, finished_at = now(), parked_reason = null,
         cancel_requested_at = coalesce(r.cancel_requested_at, now()),
         cancel_reason = coalesce(r.cancel_reason, $12), updated_at = now()
    from orig, fork
   where r.id = orig.id and $4::text = 'cancel' and orig.status in ('pending', 'running', 'waiting')
  returning r.id, r.epoch, r.notify_on_finish
), doubt as (
  update ${t.commands} c set status = 'in_doubt', updated_at = now()
    from ended where c.run_id = ended.id and c.status = 'pending'
), ${closeUnsentCommands(t, 'true', 'ended')}, ${releaseSlots(
  t,
  '(select orig.id, orig.epoch from orig join ended on ended.id = orig.id)',
)}, cps as (
  insert into ${t.checkpoints} (run_id, step_index, step_name, output, attempt, epoch, meta, seq, fingerprint)
  select fork.id, c.step_index, c.step_name,
         case when c.step_index = $7 then $8::jsonb else c.output end, c.attempt, c.epoch,
         case when c.step_index = $7 then '{"edited":true}'::jsonb else c.meta end, c.seq, c.fingerprint
    from fork join ${t.checkpoints} c on c.run_id = $1
   where (c.step_index >= 0 and c.step_index < $3)
      or (c.step_index between ${LOWEST_PATCH} and -1)
      or (c.step_index < ${LOWEST_PATCH} and ${LOWEST_PATCH - 1} - c.step_index < $3)
  returning step_index
), sigs as (
  insert into ${t.signals} (run_id, name, payload)
  select fork.id, s.name, s.payload from fork join ${t.signals} s on s.run_id = $1
   where s.name = any($14::text[])
), created as (
  insert into ${t.events} (run_id, event_type, epoch, payload)
  select fork.id, 'run.created', 0,
         $10::jsonb || jsonb_build_object('inherited', (select count(*) from cps)) from fork
), forked as (
  insert into ${t.events} (run_id, event_type, epoch, payload)
  select orig.id, 'run.forked', coalesce((select epoch from ended), orig.epoch),
         $11::jsonb || jsonb_build_object('fork', fork.id) from orig, fork
), cancelled as (
  insert into ${t.events} (run_id, event_type, epoch, payload)
  select ended.id, 'run.cancelled', ended.epoch, $13::jsonb || jsonb_build_object('fork', fork.id)
    from ended, fork
)
select (select count(*) from orig)::int as locked, exists (select 1 from ${t.runs} where id = $1) as found,
       (select count(*) from cps)::int as inherited,
       (select count(pg_notify($15, f.kind)) from fork f where f.available_at <= now()) as woke,
       (select count(pg_notify('${t.doneChannel}', e.id::text)) from ended e where e.notify_on_finish) as announced,
       ${runViewColumns('fork')}
  from (select 1) one left join fork on true`;
