import { INestApplication, LoggerService } from '@nestjs/common';
import { Pool } from 'pg';
import { DurableAdminModule } from '../../src';
import { ReplicationCheck } from '../../src/maintenance/replication-check.service';
import { DurableDatabase } from '../../src/store/durable-database';
import { ReplicationStore } from '../../src/store/replication.store';
import { replicationReport } from '../../src/util/replication-report';
import { bootHttpApp } from '../helpers/app';
import { ReplicaSet, startReplicaSet } from '../helpers/replica-set';

/**
 * What holds when PostgreSQL fails over depends on replication (issue 23, item 1): the module says which
 * mode it runs in, at start-up (a warning per thing to change) and in its health route, read from a real
 * primary with a real streaming standby (started by the test on ports of its own).
 */

class Lines implements LoggerService {
  readonly warnings: string[] = [];
  readonly logs: string[] = [];
  log(m: unknown) {
    this.logs.push(String(m));
  }
  warn(m: unknown) {
    this.warnings.push(String(m));
  }
  error() {}
  debug() {}
  verbose() {}
}

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
  const logs = new Lines();
  const { app, http } = await bootHttpApp(url, {
    imports: [
      DurableAdminModule.forRoot({
        allowAnonymous: true,
        observability: { metrics: false, health: { detailed } },
      }),
    ],
    logger: logs,
  });
  apps.push(app);
  const health = async () => {
    const res = await fetch(`${http}/durable/health`);
    return { status: res.status, body: (await res.json()) as any };
  };
  return { app, logs, health };
}

async function until(what: string, check: () => Promise<boolean>) {
  for (let i = 0; i < 100; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`not reached in 10 s: ${what}`);
}

describe('replication check', () => {
  it('an asynchronous standby is warned about at start-up and reported by health; synchronous once required', async () => {
    const { app, logs, health } = await boot(rs.primaryUrl, true);
    expect(logs.warnings).toEqual([
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
    await until(
      'the standby is synchronous',
      async () =>
        (await rs.primary(`select 1 from pg_stat_replication where sync_state = 'sync'`)).length === 1,
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
    expect(logs.logs).toContain('replication: synchronous');
  }, 60_000);

  it('a pool whose sessions commit without waiting is asynchronous though the server requires a standby', async () => {
    const url = `${rs.primaryUrl}?options=${encodeURIComponent('-c synchronous_commit=local')}`;
    const { logs, health } = await boot(url, false);
    expect(logs.warnings).toEqual([
      expect.stringContaining('synchronous_commit is local for the module (a commit does not wait'),
    ]);
    // Without `health.detailed`: the mode and how many warnings, no names or settings.
    expect((await health()).body.info.replication).toEqual({
      status: 'up',
      mode: 'asynchronous',
      warnings: 1,
    });
  }, 60_000);

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
