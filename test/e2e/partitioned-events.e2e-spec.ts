import { INestApplication, Injectable } from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import { DurableStep, DurableWorkflow, RunRepository } from '../../src';
import { DurableRetention, DurableRetentionModule } from '../../src/maintenance/retention';
import { revertDurableMigrations, runDurableMigrations } from '../../src/migrations';
import { DURABLE_EXECUTION_MIGRATIONS } from '../../migrations';
import { EventPartitionsStore } from '../../src/store/event-partitions.store';
import { bootModules, durableModule } from '../helpers/app';
import { createTestDatabase, queryOnce, serverUrl, TestDatabase } from '../helpers/database';
import { driveUntil } from '../helpers/drive';

/**
 * ai_events partitioned by week (migration 1767000000000): the migration keeps a table full of events
 * (ids, rows, a run's history) and down() restores it; upkeep makes weeks ahead and moves rows out of
 * the DEFAULT partition; retention drops a past week whose runs are all past retention and keeps one
 * that holds an open run's events.
 */
@Injectable()
class Steps {
  @DurableStep({ name: 'a' })
  async a(v: number) {
    return v + 1;
  }
}

@DurableWorkflow('part-job')
class PartJob {
  constructor(private readonly s: Steps) {}
  async run(input: { v: number }) {
    return (await this.s.a(input.v)) + (await this.s.a(input.v * 2));
  }
}

const DAY = 86_400_000;
/** The partitioning and the migrations after it, newest first: reverted together (each reverts cleanly). */
const FROM_PARTITIONING = DURABLE_EXECUTION_MIGRATIONS.map((m) => m.name)
  .slice(DURABLE_EXECUTION_MIGRATIONS.findIndex((m) => m.name === 'PartitionedEvents1767000000000'))
  .reverse();
const revertPartitioning = (url: string) =>
  revertDurableMigrations({ type: 'postgres', url }, FROM_PARTITIONING.length);
const migrate = (url: string) => runDurableMigrations({ type: 'postgres', url });
const boot = (url: string) =>
  bootModules({
    imports: [
      durableModule(url, { database: { url, migrationsRun: false } }),
      DurableRetentionModule.forRoot({ pruneAfterMs: 7 * DAY, enabled: false }),
    ],
    providers: [Steps, PartJob],
  });
const relkind = async (db: TestDatabase) =>
  (await db.query(`select relkind::text as k from pg_class where oid = 'ai_events'::regclass`))[0].k;
const where = async (db: TestDatabase, id: string) =>
  (await db.query(`select tableoid::regclass::text as p from ai_events where id = $1`, [id]))[0].p;

describe('ai_events partitioned by week', () => {
  let db: TestDatabase;
  let app: INestApplication;
  const role = `dx_part_${randomBytes(3).toString('hex')}`;

  beforeAll(async () => {
    db = await createTestDatabase('partevents');
    await migrate(db.url);
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
    await queryOnce({ connectionString: serverUrl() }, `drop role if exists ${role}`);
  });

  it('the migration keeps a table holding events: rows, ids, grants, a run history; down() restores it', async () => {
    expect(await revertPartitioning(db.url)).toEqual(FROM_PARTITIONING);
    expect(await relkind(db)).toBe('r');
    app = await boot(db.url);
    const runs = app.get(RunRepository);
    const ids: string[] = [];
    for (let v = 0; v < 3; v++) ids.push((await runs.start('part-job', { v })).run.id);
    for (const id of ids) expect((await driveUntil(app, db, id)).status).toBe('succeeded');
    // An old event, as a database that has run for a while holds.
    await db.query(
      `insert into ai_events (run_id, event_type, created_at) values ($1, 'old.note', now() - interval '90 days')`,
      [ids[0]],
    );
    await db.query(`create role ${role}`);
    await db.query(`grant select on ai_events to ${role}`);
    const before = await db.query(`select * from ai_events order by id`);
    const history = await runs.events(ids[0]);
    const [{ max }] = await db.query(`select max(id)::text as max from ai_events`);

    await migrate(db.url);
    expect(await relkind(db)).toBe('p');
    expect(await db.query(`select * from ai_events order by id`)).toEqual(before);
    expect(await runs.events(ids[0])).toEqual(history);
    expect(await where(db, before[0].id)).toBe('ai_events_legacy');
    const [{ ok }] = await db.query(`select has_table_privilege($1, 'ai_events', 'select') as ok`, [role]);
    expect(ok).toBe(true);
    // Ids go on; the step path writes into the partitioned table; the trigger function still inserts.
    const next = (await runs.start('part-job', { v: 9 })).run.id;
    expect((await driveUntil(app, db, next)).status).toBe('succeeded');
    const [{ min }] = await db.query(`select min(id)::text as min from ai_events where run_id = $1`, [next]);
    expect(BigInt(min)).toBe(BigInt(max) + 1n);
    const [parent] = await db.query(
      `insert into ai_runs (kind, input, status) values ('p', '{}', 'waiting') returning id`,
    );
    const [child] = await db.query(
      `insert into ai_runs (kind, input, parent_id) values ('c', '{}', $1) returning id`,
      [parent.id],
    );
    await db.query(`update ai_runs set status = 'cancelled', finished_at = now() where id = $1`, [child.id]);
    expect(await db.query(`select event_type from ai_events where run_id = $1`, [parent.id])).toEqual([
      { event_type: 'child.ended' },
    ]);
    const all = await db.query(`select * from ai_events order by id`);

    await app.close();
    await revertPartitioning(db.url);
    expect(await relkind(db)).toBe('r');
    expect(await db.query(`select * from ai_events order by id`)).toEqual(all);
    const [{ def }] = await db.query(
      `select pg_get_constraintdef(oid) as def from pg_constraint where conname = 'ai_events_pkey'`,
    );
    expect(def).toBe('PRIMARY KEY (id)');
    const [{ ok: still }] = await db.query(`select has_table_privilege($1, 'ai_events', 'select') as ok`, [
      role,
    ]);
    expect(still).toBe(true);
    await db.query(`revoke all on ai_events from ${role}`);
    await migrate(db.url);
    expect(await relkind(db)).toBe('p');
    app = await boot(db.url);
  }, 60_000);

  it('upkeep makes the weeks ahead and moves rows the DEFAULT partition took into theirs', async () => {
    const store = app.get(EventPartitionsStore);
    const [run] = await db.query(`insert into ai_runs (kind, input) values ('k', '{}') returning id`);
    const far = async (weeks: number) =>
      (
        await db.query(
          `insert into ai_events (run_id, event_type, created_at)
           values ($1, 'far', now() + $2 * interval '7 days') returning id::text`,
          [run.id, weeks],
        )
      )[0].id as string;
    const early = await far(10);
    expect(await where(db, early)).toBe('ai_events_default');
    const made = await store.ensureAhead(12);
    expect(made.length).toBeGreaterThanOrEqual(7);
    const [{ week }] = await db.query(
      `select 'ai_events_p' || to_char(date_trunc('week', (now() + interval '70 days') at time zone 'UTC'), 'YYYYMMDD') as week`,
    );
    expect(await where(db, early)).toBe(week);
    expect(await db.query(`select count(*)::int as n from ai_events_default`)).toEqual([{ n: 0 }]);
    const later = await far(11);
    expect(await where(db, later)).not.toBe('ai_events_default');
    expect(await store.ensureAhead(12)).toEqual([]);
    await db.query(`delete from ai_runs where id = $1`, [run.id]);
  });

  it('retention drops a past week whose runs are all past it, and keeps a week holding an open run', async () => {
    // A database that has run for weeks: drop the (empty here) legacy partition, make two past weeks.
    const legacy = await db.query(`select count(*)::int as n from ai_events_legacy`);
    await db.query(`delete from ai_events_legacy`);
    expect(legacy[0].n).toBeGreaterThan(0);
    const [{ lo, bound }] = await db.query(
      `select date_trunc('week', now() at time zone 'UTC') at time zone 'UTC' - interval '35 days' as lo,
              pg_get_expr(relpartbound, oid) as bound from pg_class where relname = 'ai_events_legacy'`,
    );
    const upper = /TO \('(.+)'\)/.exec(bound)![1];
    await db.query(`drop table ai_events_legacy`);
    const week = (i: number) => new Date(lo.getTime() + i * 7 * DAY).toISOString();
    const part = (name: string, from: string, to: string) =>
      db.query(`create table ${name} partition of ai_events for values from ('${from}') to ('${to}')`);
    await part('ai_events_wa', week(0), week(1));
    await part('ai_events_wb', week(1), week(2));
    await part('ai_events_wc', week(2), upper);
    const run = async (status: string, finishedDaysAgo: number | null) =>
      (
        await db.query(
          `insert into ai_runs (kind, input, status, created_at, finished_at)
           values ('k', '{}', $1, $2::timestamptz, now() - $3 * interval '1 day') returning id`,
          [status, week(0), finishedDaysAgo],
        )
      )[0].id as string;
    const events = (id: string, at: string, n: number) =>
      db.query(
        `insert into ai_events (run_id, event_type, created_at)
         select $1, 'e', $2::timestamptz + g * interval '1 minute' from generate_series(1, $3) g`,
        [id, at, n],
      );
    const [doneA, spanning, open, doneB] = [
      await run('succeeded', 30),
      await run('succeeded', 20),
      await run('waiting', null),
      await run('succeeded', 25),
    ];
    await events(doneA, week(0), 5);
    await events(spanning, week(0), 3);
    await events(spanning, new Date().toISOString(), 2);
    await db.query(
      `insert into ai_checkpoints (run_id, step_index, step_name, output, epoch) values ($1, 0, 's', '1', 0)`,
      [spanning],
    );
    await events(open, week(1), 4);
    await events(doneB, week(1), 6);
    const openHistory = await app.get(RunRepository).events(open);

    const result = await app.get(DurableRetention).sweep();
    expect(result.partitions?.dropped).toEqual(['public.ai_events_wa']);
    expect(result.partitions?.kept).toEqual(['public.ai_events_wb']);
    expect(await db.query(`select to_regclass('ai_events_wa') as r`)).toEqual([{ r: null }]);
    const state = async (id: string) =>
      (await db.query(`select state->'retention' as r from ai_runs where id = $1`, [id]))[0].r;
    expect(await state(doneA)).toMatchObject({ events: 5, checkpoints: 0 });
    expect(await state(spanning)).toMatchObject({ events: 5, checkpoints: 1 });
    const left = async (id: string) =>
      (await db.query(`select event_type from ai_events where run_id = $1`, [id])).map((r) => r.event_type);
    expect(await left(spanning)).toEqual(['run.pruned']);
    // The kept week: the open run whole; the finished run beside it pruned row by row, as before.
    expect(await app.get(RunRepository).events(open)).toEqual(openHistory);
    expect(await state(open)).toBeNull();
    expect(await state(doneB)).toMatchObject({ events: 6 });
    expect(await left(doneB)).toEqual(['run.pruned']);
    // The next sweep still keeps the open run's week.
    expect((await app.get(DurableRetention).sweep()).partitions?.kept).toEqual(['public.ai_events_wb']);
    expect(await app.get(RunRepository).events(open)).toEqual(openHistory);
  });
});
