import type { SqlText } from '../durable-names';

/** The lowest patch marker position (`patchIndex`): below it, sleeps' due times (`-2^30 - 1 - position`). */
const LOWEST_PATCH = -(2 ** 30);

/**
 * A rewind in place (`RunRepository.fork` with `inPlace`), in ONE statement: run $1, failed or
 * dead-lettered, is locked only if its row is still the version the plan read (`$2`; else nothing
 * happens and the caller plans again). It goes back to `waiting`, due now, its attempts, error, output and
 * cursor reset, under its next **generation**: every key it makes from now on (commands, children, values
 * drawn in steps) carries the generation part, so what it runs again is keyed apart from what it sent
 * before (those command rows stay, settled, under their keys). Its checkpoints from position $3 on (and
 * the due times of sleeps from there, its cleanup's positions) move to `ai_rewound_checkpoints` under the
 * generation they were taken out of; the result at `$6` is replaced by `$7` (its old row archived too);
 * the end signals `$10` of children it keeps the start of but no longer the wait for are delivered again;
 * input `$4` and version `$5` replace the run's when given; a `run.rewound` event. Patch markers stay.
 * $1 id, $2 row version, $3 from step, $4 input, $5 version, $6 edited index, $7 edited output,
 * $8 `run.rewound` payload, $9 wake channel, $10 child end signal names
 */
export const REWIND_RUN_SQL: SqlText = (t) => `
with cur as (
  select r.id, r.status from ${t.runs} r where r.id = $1 and r.xmin::text = $2 for update
), upd as (
  update ${t.runs} r
     set status = 'waiting', generation = r.generation + 1, cursor = default, attempts = 0,
         available_at = now(), error = null, output = null, finished_at = null, parked_reason = null,
         input = coalesce($4::jsonb, r.input), kind_version = coalesce($5::int, r.kind_version),
         updated_at = now()
    from cur
   where r.id = cur.id and cur.status in ('failed', 'dead_lettered')
  returning r.id, r.epoch, r.kind, r.generation
), moved as (
  delete from ${t.checkpoints} c using upd
   where c.run_id = upd.id
     and (c.step_index >= $3 or (c.step_index < ${LOWEST_PATCH} and ${LOWEST_PATCH - 1} - c.step_index >= $3))
  returning c.run_id, c.step_index, c.step_name, c.output, c.attempt, c.epoch, c.meta, c.seq, c.fingerprint,
            c.created_at, c.event_id, c.event
), edited as (
  update ${t.checkpoints} c set output = $7::jsonb, meta = '{"edited":true}'::jsonb
    from upd, ${t.checkpoints} o
   where c.run_id = upd.id and c.step_index = $6 and o.run_id = c.run_id and o.step_index = c.step_index
  returning o.run_id, o.step_index, o.step_name, o.output, o.attempt, o.epoch, o.meta, o.seq, o.fingerprint,
            o.created_at, null::bigint as event_id, null::jsonb as event
), arch as (
  -- A moved checkpoint keeps its step's event in the archive (the run's trail still shows it); the
  -- edited one's stays on the row that remains.
  insert into ${t.rewound} (run_id, generation, step_index, step_name, output, attempt, epoch, meta, seq,
                            fingerprint, created_at, event_id, event)
  select m.run_id, upd.generation - 1, m.step_index, m.step_name, m.output, m.attempt, m.epoch, m.meta, m.seq,
         m.fingerprint, m.created_at, m.event_id, m.event
    from (select * from moved union all select * from edited) m, upd
  returning step_index
), sig as (
  update ${t.signals} s set consumed_at = null
    from upd where s.run_id = upd.id and s.name = any($10::text[]) and s.consumed_at is not null
), ev as (
  insert into ${t.events} (run_id, event_type, epoch, payload)
  select upd.id, 'run.rewound', upd.epoch,
         $8::jsonb || jsonb_build_object('generation', upd.generation, 'archived', (select count(*) from arch))
    from upd
)
select (select count(*) from cur)::int as locked, exists (select 1 from ${t.runs} where id = $1) as found,
       (select count(*) from upd)::int as rewound, (select count(*) from arch)::int as archived,
       (select count(pg_notify($9, u.kind)) from upd u) as woke`;
