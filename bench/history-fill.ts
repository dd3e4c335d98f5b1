import { Client } from 'pg';
import { CURRENT_TIMELINE } from '../src/store/sql/timeline.sql';
import { DEFAULT_NAMES as T } from '../src/store/durable-names';
import {
  RETENTION_PARTITION_CHECK_SQL,
  RETENTION_PARTITION_PRUNE_SQL,
  RETENTION_PRUNE_SQL,
} from '../src/store/retention.store';
import { log } from './cli';

const PRUNABLE = ['succeeded', 'cancelled'];

/** The shape of the history both databases get, alike (run ids are md5 of their number). */
export interface HistoryShape {
  /** Weeks of history before the current one (one partition each in the partitioned database). */
  weeks: number;
  /** Finished runs spread evenly over those weeks, each with `events` events and `checkpoints` checkpoints. */
  runs: number;
  events: number;
  checkpoints: number;
  /** Long-lived waiting runs from week 1 on, their `events` events spread over every later week. */
  longLived: number;
  /** Runs per insert statement. */
  batchRuns: number;
}

export const KIND = 'bench.history';
export const WORKER = 'bench-history-worker';

/** `t0 + (run i's offset)`: run i of `runs` starts at its share of `weeks` weeks, oldest first. */
const runStart = (s: HistoryShape) =>
  `(select w0 from z) + (i - 1) * (${s.weeks} * interval '7 days' / ${s.runs})`;
const z = (s: HistoryShape) =>
  `with z as (select date_trunc('week', now() at time zone 'UTC') at time zone 'UTC' - ${s.weeks} * interval '7 days' as w0)`;

/**
 * Replaces the fresh partitioned table's first partition (legacy, empty on a new database) by one
 * partition a week over the bench's history; the weeks ahead and DEFAULT stay as the migration made them.
 */
export async function weeklyPartitions(c: Client, s: HistoryShape): Promise<number> {
  await c.query(`drop table ai_events_legacy`);
  await c.query(`
    do $$
    declare w0 timestamptz := date_trunc('week', now() at time zone 'UTC') at time zone 'UTC';
    begin
      for k in reverse ${s.weeks}..0 loop
        execute format('create table %I partition of ai_events for values from (%L) to (%L)',
          'ai_events_p' || to_char((w0 - k * interval '7 days') at time zone 'UTC', 'YYYYMMDD'),
          w0 - k * interval '7 days', w0 - (k - 1) * interval '7 days');
      end loop;
    end $$`);
  const { rows } = await c.query(
    `select count(*)::int as n from pg_inherits where inhparent = 'ai_events'::regclass`,
  );
  return rows[0].n;
}

/**
 * Fills one database: runs, then events and checkpoints in batches of `batchRuns` runs, with the
 * events' indexes dropped and built once at the end (as a sort, not 20 million random inserts) and the
 * foreign-key triggers off (session_replication_role = replica; every run_id is a run's). Then VACUUM
 * ANALYZE, as autovacuum would leave an insert-only table. Returns seconds.
 */
export async function fill(c: Client, s: HistoryShape, partitioned: boolean): Promise<number> {
  const t0 = performance.now();
  await c.query(`set session_replication_role = replica`);
  await c.query(`set maintenance_work_mem = '512MB'`);
  await c.query(`alter table ai_events drop constraint ai_events_pkey`);
  await c.query(`drop index ai_events_run_idx, ai_events_created_idx`);
  await c.query(`
    ${z(s)}
    insert into ai_runs (id, kind, input, status, epoch, attempts, created_at, finished_at, updated_at, timeline)
    select md5('r' || i)::uuid, '${KIND}', '{}', 'succeeded', 1, 1, ${runStart(s)},
           ${runStart(s)} + interval '1 hour', ${runStart(s)} + interval '1 hour', ${CURRENT_TIMELINE}
      from generate_series(1, ${s.runs}) i`);
  await c.query(`
    ${z(s)}
    insert into ai_runs (id, kind, input, status, epoch, attempts, created_at, available_at, timeline)
    select md5('l' || i)::uuid, '${KIND}', '{}', 'waiting', 1, 1, (select w0 from z) + interval '7 days',
           'infinity', ${CURRENT_TIMELINE}
      from generate_series(1, ${s.longLived}) i`);
  for (let lo = 1; lo <= s.runs; lo += s.batchRuns) {
    const hi = Math.min(s.runs, lo + s.batchRuns - 1);
    await c.query(`
      ${z(s)}
      insert into ai_events (run_id, event_type, epoch, payload, created_at)
      select md5('r' || i)::uuid, 'step.completed', 1, '{"step": "s", "attempt": 0}'::jsonb,
             ${runStart(s)} + g * interval '10 seconds'
        from generate_series(${lo}, ${hi}) i, generate_series(1, ${s.events}) g`);
    await c.query(`
      ${z(s)}
      insert into ai_checkpoints (run_id, step_index, step_name, output, epoch, created_at)
      select md5('r' || i)::uuid, g, 'step-' || g, '{"ok": true}', 1, ${runStart(s)} + g * interval '10 seconds'
        from generate_series(${lo}, ${hi}) i, generate_series(0, ${s.checkpoints - 1}) g`);
    log(
      `  ${partitioned ? 'partitioned' : 'plain'}: runs ${hi}/${s.runs} (${((performance.now() - t0) / 1000).toFixed(0)} s)`,
    );
  }
  await c.query(`
    ${z(s)}
    insert into ai_events (run_id, event_type, epoch, payload, created_at)
    select md5('l' || i)::uuid, 'step.completed', 1, jsonb_build_object('step', g),
           (select w0 from z) + interval '7 days' + g * (${s.weeks - 1} * interval '7 days' / ${s.events + 1})
      from generate_series(1, ${s.longLived}) i, generate_series(1, ${s.events}) g`);
  await c.query(`alter table ai_events add primary key (${partitioned ? 'id, created_at' : 'id'})`);
  await c.query(`create index ai_events_run_idx on ai_events (run_id, id)`);
  await c.query(`create index ai_events_created_idx on ai_events (created_at)`);
  await c.query(`set session_replication_role = origin`);
  await c.query(`vacuum analyze ai_events`);
  await c.query(`vacuum analyze ai_runs`);
  await c.query(`vacuum analyze ai_checkpoints`);
  return (performance.now() - t0) / 1000;
}

/**
 * The retention horizon for the week ending at `weekEnd`: 61 minutes later, so that the runs created in
 * its last minutes, finished an hour later, are past it too.
 */
const ageFor = (weekEnd: Date) => Date.now() - weekEnd.getTime() - 61 * 60_000;

/** Per-run retention of the runs that finished before the week ending at `weekEnd`: seconds, events. */
export async function perRunPrune(c: Client, weekEnd: Date): Promise<{ s: number; events: number }> {
  const ageMs = ageFor(weekEnd);
  const t0 = performance.now();
  let after: [string, string] | [null, null] = [null, null];
  let events = 0;
  for (;;) {
    const { rows }: { rows: any[] } = await c.query(RETENTION_PRUNE_SQL(T), [PRUNABLE, ageMs, ...after, 500]);
    events += rows[0].events;
    if (rows[0].runs < 500) break;
    after = rows[0].last_key.split('|');
  }
  return { s: (performance.now() - t0) / 1000, events };
}

/** EventPartitionsStore.dropIfPast's statements on one partition: seconds, dropped, events. */
export async function partitionDrop(c: Client, name: string, from: Date, to: Date) {
  const ageMs = ageFor(to);
  const t0 = performance.now();
  await c.query('begin');
  await c.query(`select set_config('lock_timeout', '5s', true)`);
  await c.query(`lock table ${name} in share mode`);
  const check = await c.query(RETENTION_PARTITION_CHECK_SQL(T, name), [PRUNABLE, ageMs]);
  const checkS = (performance.now() - t0) / 1000;
  if (check.rows[0].blockers > 0) {
    await c.query('rollback');
    return { s: checkS, dropped: false, blockers: check.rows[0].blockers, events: 0 };
  }
  const pruned = await c.query(RETENTION_PARTITION_PRUNE_SQL(T, name), [ageMs, from, to]);
  await c.query(`lock table ai_events in access exclusive mode`);
  await c.query(`drop table ${name}`);
  await c.query('commit');
  return { s: (performance.now() - t0) / 1000, dropped: true, blockers: 0, events: pruned.rows[0].events };
}
