import { Injectable } from '@nestjs/common';
import type { RunCursorKey } from '../util/run-cursor';
import { DurableDatabase } from './durable-database';
import { cursorValues } from './run-keyset';
import { missingRetentionPrivileges, RetentionPrivileges } from './retention-privileges';
import type { DurableNames, SqlText } from './durable-names';

/**
 * Both horizons leave a run alone while one of its commands is not settled (an operator may still have
 * to decide it, or an approved one waits for its run). `r` is the run.
 */
export const noOpenCommand = (
  t: DurableNames,
) => `not exists (select 1 from ${t.commands} c where c.run_id = r.id
                      and c.status in ('pending', 'in_doubt', 'awaiting_approval', 'approved'))`;

/**
 * A prune's `trail`: the events it deletes, as rows of their run (`ev`), with those written in the
 * checkpoint rows it deletes (a step's `run.checkpoint_saved` is in its checkpoint's row, EVENT_TRAIL),
 * a rewind's set-aside ones too (`rewound`).
 */
const TRAIL = `trail as (
  select run_id from ev
  union all select run_id from cp where event_id is not null
  union all select run_id from rewound where event_id is not null
)`;

/**
 * Retention, one batch in one statement: the checkpoints (and those a rewind set aside), events, signals and stream entries of up to $5 finished runs
 * (succeeded/cancelled only: a failed or dead-lettered run can still be retried from its checkpoints)
 * that finished more than $2 ms ago (database clock) and hold no unsettled command (an operator may still have to resolve it).
 * The run row stays as the summary (status, input, output, error) and records the pruning in `state`
 * and in one `run.pruned` event. SKIP LOCKED: never waits on a row someone else is changing. Keyset on
 * (created_at, id) through ai_runs_list_idx, so one sweep reads each old row once. Each delete takes the
 * victims as one array (`run_id = any(array(...))`): an index scan per table, or per partition of
 * ai_events, where a join with the CTE let the planner hash-join a sequential scan of every partition.
 * $1 statuses, $2 age in ms, $3/$4 cursor (created_at text, id), $5 batch size
 */
export const RETENTION_PRUNE_SQL: SqlText = (t) => `
with h as (
  select now() - $2::float8 * interval '1 millisecond' as before
), victims as (
  select r.id, r.epoch, r.created_at from ${t.runs} r, h
   where r.status = any($1::text[])
     and r.created_at < h.before and r.finished_at < h.before
     and not (r.state ? 'retention')
     and ($3::timestamptz is null or (r.created_at, r.id) > ($3::timestamptz, $4::uuid))
     and ${noOpenCommand(t)}
   order by r.created_at, r.id
   limit $5
   for update skip locked
), cp as (
  delete from ${t.checkpoints} c where c.run_id = any (array(select id from victims)) returning c.run_id, c.event_id
), ev as (
  delete from ${t.events} e where e.run_id = any (array(select id from victims)) returning e.run_id
), sig as (
  delete from ${t.signals} s where s.run_id = any (array(select id from victims)) returning s.run_id
), stream as (
  delete from ${t.stream} s where s.run_id = any (array(select id from victims))
), rewound as (
  delete from ${t.rewound} w where w.run_id = any (array(select id from victims)) returning w.run_id, w.event_id
), ${TRAIL}, n as (
  select v.id, v.epoch, coalesce(cpn.n, 0) as checkpoints, coalesce(evn.n, 0) as events
    from victims v
    left join (select run_id, count(*) as n from cp group by run_id) cpn on cpn.run_id = v.id
    left join (select run_id, count(*) as n from trail group by run_id) evn on evn.run_id = v.id
), mark as (
  update ${t.runs} r
     set state = r.state || jsonb_build_object('retention', jsonb_build_object(
           'prunedAt', now(), 'checkpoints', n.checkpoints, 'events', n.events))
    from n where r.id = n.id
), note as (
  insert into ${t.events} (run_id, event_type, epoch, payload)
  select n.id, 'run.pruned', n.epoch,
         jsonb_build_object('by', 'retention', 'checkpoints', n.checkpoints, 'events', n.events,
                            'finishedBefore', h.before)
    from n, h
)
select (select count(*) from victims)::int as runs,
       (select count(*) from cp)::int as checkpoints,
       (select count(*) from trail)::int as events,
       (select count(*) from sig)::int as signals,
       (select to_char(created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') || '|' || id
          from victims order by created_at desc, id desc limit 1) as last_key`;

/**
 * Retention's second horizon, one batch in one statement: whole finished runs (any terminal status)
 * that finished more than $1 ms ago (database clock) are deleted; ON DELETE CASCADE takes their
 * checkpoints, commands, events and signals with them, so a later `retry` answers "run not found"
 * instead of replaying from nothing. Runs with an unsettled command stay for the operator.
 * SKIP LOCKED: a concurrent retry or cancel is never waited on; that row is left for the next sweep.
 * $1 age in ms, $2 batch size
 */
export const RETENTION_DELETE_RUNS_SQL: SqlText = (t) => `
with h as (
  select now() - $1::float8 * interval '1 millisecond' as before
), victims as (
  select r.id from ${t.runs} r, h
   where r.status in ('succeeded', 'failed', 'cancelled', 'dead_lettered')
     and r.created_at < h.before and r.finished_at < h.before
     and ${noOpenCommand(t)}
   order by r.created_at, r.id
   limit $2
   for update skip locked
), del as (
  delete from ${t.runs} r using victims v where r.id = v.id returning r.id
)
select count(*)::int as runs from del`;

/**
 * Whether a partition of ai_events may go whole (EventPartitionsStore.dropIfPast): of the runs with
 * events in `partition`, how many are neither pruned already nor prunable now by RETENTION_PRUNE_SQL's
 * rule ($1 statuses, finished $2 ms ago, no unsettled command). Locks those runs (FOR UPDATE, waited
 * on under the caller's lock_timeout) so none changes before the drop. Reads the partition once.
 */
export const RETENTION_PARTITION_CHECK_SQL = (t: DurableNames, partition: string): string => `
with h as (
  select now() - $2::float8 * interval '1 millisecond' as before
), c as (
  select r.state ? 'retention' as pruned,
         (r.status = any($1::text[]) and r.created_at < h.before and r.finished_at < h.before
          and ${noOpenCommand(t)}) as ok
    from ${t.runs} r, h
   where r.id in (select e.run_id from ${partition} e)
     for update of r
)
select count(*) filter (where not pruned and not ok)::int as blockers from c`;

/**
 * With RETENTION_PARTITION_CHECK_SQL's answer 0, in its transaction: prunes the runs with events in
 * `partition` not pruned yet as RETENTION_PRUNE_SQL does, except their events inside the partition
 * (the drop that follows takes them): counted, not deleted. $1 age in ms (the note's `finishedBefore`),
 * $2/$3 the partition's range (null: unbounded).
 */
export const RETENTION_PARTITION_PRUNE_SQL = (t: DurableNames, partition: string): string => `
with h as (
  select now() - $1::float8 * interval '1 millisecond' as before
), victims as (
  select r.id, r.epoch from ${t.runs} r
   where r.id in (select e.run_id from ${partition} e) and not (r.state ? 'retention')
), inside as (
  select e.run_id, count(*) as n from ${partition} e join victims v on v.id = e.run_id group by e.run_id
), cp as (
  delete from ${t.checkpoints} c where c.run_id = any (array(select id from victims)) returning c.run_id, c.event_id
), ev as (
  delete from ${t.events} e
   where e.run_id = any (array(select id from victims)) and (e.created_at < $2::timestamptz or e.created_at >= $3::timestamptz)
  returning e.run_id
), sig as (
  delete from ${t.signals} s where s.run_id = any (array(select id from victims)) returning s.run_id
), stream as (
  delete from ${t.stream} s where s.run_id = any (array(select id from victims))
), rewound as (
  delete from ${t.rewound} w where w.run_id = any (array(select id from victims)) returning w.run_id, w.event_id
), ${TRAIL}, n as (
  select v.id, v.epoch, coalesce(cpn.n, 0) as checkpoints, coalesce(evn.n, 0) + coalesce(i.n, 0) as events
    from victims v
    left join (select run_id, count(*) as n from cp group by run_id) cpn on cpn.run_id = v.id
    left join (select run_id, count(*) as n from trail group by run_id) evn on evn.run_id = v.id
    left join inside i on i.run_id = v.id
), mark as (
  update ${t.runs} r
     set state = r.state || jsonb_build_object('retention', jsonb_build_object(
           'prunedAt', now(), 'checkpoints', n.checkpoints, 'events', n.events, 'partition', true))
    from n where r.id = n.id
), note as (
  insert into ${t.events} (run_id, event_type, epoch, payload)
  select n.id, 'run.pruned', n.epoch,
         jsonb_build_object('by', 'retention', 'checkpoints', n.checkpoints, 'events', n.events,
                            'finishedBefore', h.before)
    from n, h
)
select (select count(*) from victims)::int as runs,
       (select coalesce(sum(checkpoints), 0) from n)::int as checkpoints,
       (select coalesce(sum(events), 0) from n)::int as events`;

/** What one prune batch did, and the key of the last run it took (null when it took none). */
export interface PruneBatch {
  runs: number;
  checkpoints: number;
  events: number;
  signals: number;
  lastKey: RunCursorKey | null;
}

/** Retention's statements, one batch each. @internal */
@Injectable()
export class RetentionStore {
  constructor(private readonly db: DurableDatabase) {}

  /** Prunes the history of up to `batchSize` runs in `statuses` finished `ageMs` ago, after `after`. */
  async prune(
    statuses: string[],
    ageMs: number,
    after: RunCursorKey | null,
    batchSize: number,
  ): Promise<PruneBatch> {
    const { rows } = await this.db.query(RETENTION_PRUNE_SQL, [
      statuses,
      ageMs,
      ...cursorValues(after),
      batchSize,
    ]);
    const r = rows[0];
    const lastKey = r.last_key === null ? null : (r.last_key.split('|') as RunCursorKey);
    return { runs: r.runs, checkpoints: r.checkpoints, events: r.events, signals: r.signals, lastKey };
  }

  /** The schema's names, for messages. */
  get names(): DurableNames {
    return this.db.names;
  }

  /** What the connected role lacks for retention (catalog reads only: `RETENTION_PRIVILEGES_SQL`). */
  missingPrivileges(): Promise<RetentionPrivileges> {
    return missingRetentionPrivileges(this.db);
  }

  /** Deletes up to `batchSize` whole runs that finished `ageMs` ago; how many it deleted. */
  async deleteRuns(ageMs: number, batchSize: number): Promise<number> {
    const { rows } = await this.db.query(RETENTION_DELETE_RUNS_SQL, [ageMs, batchSize]);
    return rows[0].runs;
  }
}
