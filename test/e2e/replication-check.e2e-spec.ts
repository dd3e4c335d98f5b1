import { INestApplication } from '@nestjs/common';
import { Pool } from 'pg';
import { DurableAdminModule } from '../../src/admin';
import { ReplicationCheck } from '../../src/maintenance/replication-check.service';
import { DurableDatabase } from '../../src/store/durable-database';
import { ReplicationStore } from '../../src/store/replication.store';
import { replicationReport } from '../../src/util/replication-report';
import { bootHttpApp } from '../helpers/app';
import { CapturingLogger } from '../helpers/capturing-logger';
import { waitFor } from '../helpers/processes';
import { ReplicaSet, startReplicaSet } from '../helpers/replica-set';

/**
 * What holds when PostgreSQL fails over depends on replication (issue 23, item 1): the module says which
 * mode it runs in, at start-up (a warning per thing to change) and in its health route, read from a real
 * primary with a real streaming standby (started by the test on ports of its own).
 */

let rs: ReplicaSet;
const apps: INestApplication[] = [];

beforeAll(async () => {
  rs = await startReplicaSet();
}, 120_000);
afterAll(async () => {
  for (const app of apps) await app.close();
  await rs?.dispose();
});

async function boot(url: string, detailed: boolean) {
  const logger = new CapturingLogger();
  const { app, http } = await bootHttpApp(url, {
    imports: [
      DurableAdminModule.forRoot({
        allowAnonymous: true,
        observability: { metrics: false, health: { detailed } },
      }),
    ],
    logger,
  });
  apps.push(app);
  const health = async () => {
    const res = await fetch(`${http}/durable/health`);
    return { status: res.status, body: (await res.json()) as any };
  };
  const at = (level: string) => logger.lines.filter((l) => l.level === level).map((l) => l.message);
  return { app, warnings: () => at('warn'), logs: () => at('log'), health };
}

describe('replication check', () => {
  it('an asynchronous standby is warned about at start-up and reported by health; synchronous once required', async () => {
    const { app, warnings, logs, health } = await boot(rs.primaryUrl, true);
    expect(warnings()).toEqual([
      expect.stringMatching(
        /^replication \(asynchronous\): asynchronous replication \(synchronous_standby_names is empty\): a failover/,
      ),
    ]);
    const asyncHealth = await health();
    expect(asyncHealth.status).toBe(200);
    expect(asyncHealth.body.info.replication).toEqual({
      status: 'up',
      mode: 'asynchronous',
      synchronousCommit: 'on',
      synchronousStandbyNames: '',
      standbys: [{ name: rs.standbyName, state: 'streaming', syncState: 'async' }],
      warnings: [expect.stringContaining('asynchronous replication')],
    });

    await rs.primary(`alter system set synchronous_standby_names = '${rs.standbyName}'`);
    await rs.primary('select pg_reload_conf()');
    await waitFor(
      async () =>
        (await rs.primary(`select 1 from pg_stat_replication where sync_state = 'sync'`)).length === 1,
      10_000,
      'the standby to be synchronous',
    );
    const syncHealth = await health();
    expect(syncHealth.body.info.replication).toMatchObject({
      status: 'up',
      mode: 'synchronous',
      synchronousStandbyNames: rs.standbyName,
      standbys: [{ name: rs.standbyName, syncState: 'sync' }],
      warnings: [],
    });
    const report = await app.get(ReplicationCheck).check();
    expect(report.mode).toBe('synchronous');
    expect(logs()).toContain('replication: synchronous');
  }, 60_000);

  it('a pool whose sessions commit without waiting is asynchronous though the server requires a standby', async () => {
    const url = `${rs.primaryUrl}?options=${encodeURIComponent('-c synchronous_commit=local')}`;
    const { warnings, health } = await boot(url, false);
    expect(warnings()).toEqual([
      expect.stringContaining('synchronous_commit is local for the module (a commit does not wait'),
    ]);
    // Without `health.detailed`: the mode and how many warnings, no names or settings.
    expect((await health()).body.info.replication).toEqual({
      status: 'up',
      mode: 'asynchronous',
      warnings: 1,
    });
  }, 60_000);

  it('a commit whose wait for the synchronous standby is cancelled returns success with only a warning (docs)', async () => {
    // Required since the first test; the link stalls, so the standby confirms nothing.
    await rs.primary('create table cancelled_wait (x int)');
    rs.replication.pause();
    const pool = new Pool({ connectionString: rs.primaryUrl, max: 1 });
    const notices: string[] = [];
    pool.on('connect', (c) => c.on('notice', (n) => notices.push(n.message ?? '')));
    try {
      const { rows: me } = await pool.query('select pg_backend_pid() as pid');
      const insert = pool.query('insert into cancelled_wait values (1)');
      await waitFor(
        async () =>
          (
            await rs.primary(
              `select 1 from pg_stat_activity where pid = ${me[0].pid} and wait_event = 'SyncRep'`,
            )
          ).length === 1,
        10_000,
        'the commit to wait for the standby',
      );
      // statement_timeout cannot do this (PostgreSQL disables it before the commit); a cancel request can.
      await rs.primary(`select pg_cancel_backend(${me[0].pid})`);
      await expect(insert).resolves.toBeDefined();
      expect(notices.join('\n')).toMatch(/canceling wait for synchronous replication/);
      const { rows } = await pool.query('select count(*)::int as n from cancelled_wait');
      expect(rows[0].n).toBe(1); // committed locally, never confirmed by the standby
    } finally {
      await pool.end();
      rs.replication.switchTo(rs.primaryPort); // the link flows again
    }
  }, 30_000);

  it('a module pointed at the standby reads as standby (health down), and its writes would fail', async () => {
    const pool = new Pool({ connectionString: rs.standbyUrl, max: 1 });
    try {
      const db = { query: (sql: string, params?: unknown[]) => pool.query(sql, params) };
      const store = new ReplicationStore(db as unknown as DurableDatabase);
      const report = replicationReport(await store.read());
      expect(report).toMatchObject({ mode: 'standby', inRecovery: true });
      expect(report.warnings).toEqual([expect.stringContaining('point it at the primary')]);
      await expect(pool.query('create table t (x int)')).rejects.toThrow(/read-only transaction/);
    } finally {
      await pool.end();
    }
  });
});
