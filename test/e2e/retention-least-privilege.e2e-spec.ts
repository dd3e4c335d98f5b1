import { INestApplication } from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import {
  DurableRetention,
  DurableRetentionModule,
  DurableRetentionOptions,
} from '../../src/maintenance/retention';
import { runDurableMigrations } from '../../src/migrations';
import { bootModules, durableModule } from '../helpers/app';
import { CapturingLogger } from '../helpers/capturing-logger';
import { createTestDatabase, queryOnce, serverUrl, TestDatabase } from '../helpers/database';

/**
 * Issue 46, part 2: retention under a role that may read and write rows but not create tables or own
 * them (what most teams give an app). A week after migrating, the sweep's first act (making next week's
 * event partition) failed with "permission denied for schema public" and the whole sweep aborted: nothing
 * was pruned again. Now a partition the role may not make or drop is logged once, with the privilege it
 * needs, and the row-by-row prune goes on; the boot check names what the role lacks and
 * `eventPartitions: false` as the way for such a role.
 */
const DAY = 86_400_000;

describe('retention under a DML-only role', () => {
  let db: TestDatabase;
  let app: INestApplication | undefined;
  const role = `dx_dml_${randomBytes(3).toString('hex')}`;
  let roleUrl: string;

  const boot = async (retention: Partial<DurableRetentionOptions>, logger: CapturingLogger) => {
    app = await bootModules(
      {
        imports: [
          durableModule(roleUrl, { database: { url: roleUrl, migrationsRun: false } }),
          DurableRetentionModule.forRoot({ pruneAfterMs: 7 * DAY, enabled: false, ...retention }),
        ],
      },
      logger,
    );
    return app;
  };
  /** A run finished `days` ago with `events` events, as the DML role cannot backdate rows itself. */
  const oldRun = async (days: number, events: number, at = `now() - interval '${days} days'`) => {
    const [run] = await db.query(
      `insert into ai_runs (kind, input, status, created_at, finished_at)
       values ('old-job', '{}', 'succeeded', now() - $1 * interval '1 day', now() - $1 * interval '1 day')
       returning id`,
      [days],
    );
    await db.query(
      `insert into ai_events (run_id, event_type, created_at)
       select $1, 'step.done', ${at} + g * interval '1 second' from generate_series(1, $2) g`,
      [run.id, events],
    );
    await db.query(
      `insert into ai_checkpoints (run_id, step_index, step_name, output, epoch) values ($1, 0, 's', '1', 0)`,
      [run.id],
    );
    return run.id as string;
  };
  const left = async (table: string, id: string) =>
    (await db.query(`select count(*)::int as n from ${table} where run_id = $1`, [id]))[0].n as number;

  beforeAll(async () => {
    db = await createTestDatabase('retention_dml');
    await runDurableMigrations({ type: 'postgres', url: db.url });
    // Rows only: no CREATE on the schema, owner of nothing.
    await db.query(`create role ${role} login`);
    await db.query(`grant select, insert, update, delete on all tables in schema public to ${role}`);
    await db.query(`grant usage, select on all sequences in schema public to ${role}`);
    const [{ create }] = await db.query(`select has_schema_privilege($1, 'public', 'CREATE') as create`, [
      role,
    ]);
    expect(create).toBe(false);
    const u = new URL(db.url);
    u.username = role;
    roleUrl = u.toString();
    // A week after the migration: the week furthest ahead has no partition yet.
    const [last] = await db.query(
      `select c.relname from pg_inherits i join pg_class c on c.oid = i.inhrelid
        where i.inhparent = 'ai_events'::regclass and c.relname like 'ai_events_p%' order by c.relname desc limit 1`,
    );
    await db.query(`drop table ${last.relname}`);
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
    await queryOnce({ connectionString: serverUrl() }, `drop role if exists ${role}`);
  });

  it('the sweep prunes old runs though it may not make or drop a partition: each logged once, with the privilege it needs', async () => {
    const logger = new CapturingLogger();
    await boot({}, logger);
    // A past week of its own, made by the migrating role (dropping it needs ownership); the empty
    // legacy partition goes, so rows of other past weeks land in ai_events_default.
    const [{ lo }] = await db.query(
      `select date_trunc('week', now() at time zone 'UTC') at time zone 'UTC' - interval '70 days' as lo`,
    );
    await db.query(`drop table ai_events_legacy`);
    await db.query(
      `create table ai_events_past partition of ai_events
         for values from ('${lo.toISOString()}') to ('${new Date(lo.getTime() + 7 * DAY).toISOString()}')`,
    );
    const inPast = await oldRun(40, 3, `'${lo.toISOString()}'::timestamptz + interval '1 day'`);
    const old = [await oldRun(30, 4), await oldRun(20, 5)];
    const recent = await oldRun(1, 2);

    const retention = app!.get(DurableRetention);
    const result = await retention.sweep();
    expect(result).toMatchObject({ prunedRuns: 3, events: 3 + 4 + 5, checkpoints: 3 });
    expect(result.partitions).toMatchObject({ made: [], dropped: [], kept: ['public.ai_events_past'] });
    for (const id of [inPast, ...old]) {
      expect(await left('ai_checkpoints', id)).toBe(0);
      const types = await db.query(`select event_type from ai_events where run_id = $1`, [id]);
      expect(types).toEqual([{ event_type: 'run.pruned' }]);
    }
    expect(await left('ai_checkpoints', recent)).toBe(1);
    // The past week is still there (the role may not drop it); its run's rows went one by one.
    expect(await db.query(`select to_regclass('ai_events_past') is not null as there`)).toEqual([
      { there: true },
    ]);

    // A second sweep: pruning goes on, the two failures are not logged again.
    const later = await oldRun(15, 2);
    expect(await retention.sweep()).toMatchObject({ prunedRuns: 1, events: 2 });
    const warnings = logger.lines.filter((l) => l.level === 'warn').map((l) => l.message);
    const making = warnings.filter((m) => m.includes('cannot make event partitions'));
    expect(making).toHaveLength(1);
    expect(making[0]).toContain('CREATE on schema');
    expect(making[0]).toContain('ai_events_default');
    expect(making[0]).toContain('eventPartitions: false');
    const dropping = warnings.filter((m) => m.includes('cannot drop event partition'));
    expect(dropping).toHaveLength(1);
    expect(dropping[0]).toContain('ownership');
    expect(await left('ai_checkpoints', later)).toBe(0);
  });

  it('at boot, names what the role lacks for partitions and eventPartitions: false as the way; with it, nothing is tried and nothing is said', async () => {
    await app?.close();
    const logger = new CapturingLogger();
    await boot({}, logger);
    const boot1 = logger.lines.filter((l) => l.level === 'warn').map((l) => l.message);
    const partitions = boot1.filter((m) => m.includes('event partitions'));
    expect(partitions).toHaveLength(1);
    expect(partitions[0]).toContain(`CREATE on schema public`);
    expect(partitions[0]).toContain('ownership of ai_events');
    expect(partitions[0]).toContain('eventPartitions: false');
    expect(boot1.filter((m) => m.includes('cannot prune'))).toEqual([]);

    await app!.close();
    const quiet = new CapturingLogger();
    await boot({ eventPartitions: false, deleteRunsAfterMs: 365 * DAY }, quiet);
    const id = await oldRun(30, 2);
    const ancient = await oldRun(400, 1);
    const result = await app!.get(DurableRetention).sweep();
    // Both pruned; the one past deleteRunsAfterMs then deleted whole (its rows by the foreign keys).
    expect(result).toMatchObject({ prunedRuns: 2, events: 3, deletedRuns: 1 });
    expect(await db.query(`select id from ai_runs where id = $1`, [ancient])).toEqual([]);
    expect(result.partitions).toBeUndefined();
    expect(quiet.lines.filter((l) => l.level === 'warn')).toEqual([]);
    expect(await left('ai_checkpoints', id)).toBe(0);
  });

  it('a role that may not prune at all is told at boot what it lacks', async () => {
    await app?.close();
    await db.query(`revoke delete on ai_checkpoints from ${role}`);
    try {
      const logger = new CapturingLogger();
      await boot({ eventPartitions: false, deleteRunsAfterMs: 365 * DAY }, logger);
      const warnings = logger.lines.filter((l) => l.level === 'warn').map((l) => l.message);
      const prune = warnings.filter((m) => m.includes('cannot prune'));
      expect(prune).toHaveLength(1);
      expect(prune[0]).toContain('DELETE on ai_checkpoints');
    } finally {
      await db.query(`grant delete on ai_checkpoints to ${role}`);
    }
  });
});
