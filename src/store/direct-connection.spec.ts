import type { DataSourceOptions } from 'typeorm';
import {
  directClientConfig,
  directMigrationSource,
  listenConfigFor,
  routeListeners,
} from './direct-connection';

const DIRECT = 'postgres://root@db-primary:5432/app';

describe('direct connections (database.directUrl)', () => {
  it('a LISTEN config keeps the pool settings but takes its endpoint from directUrl only', () => {
    const pool = {
      connectionString: 'postgres://app@pgbouncer:6432/app',
      host: 'pgbouncer',
      port: 6432,
      user: 'app',
      password: 'pw',
      database: 'app',
      ssl: { rejectUnauthorized: false },
      application_name: 'api',
      max: 10,
    };
    expect(directClientConfig(pool, DIRECT)).toEqual({
      connectionString: DIRECT,
      ssl: { rejectUnauthorized: false },
      application_name: 'api',
      max: 10,
    });
    expect(directClientConfig(pool)).toBe(pool);
  });

  it('the migration DataSource goes to directUrl, extra endpoint settings dropped', () => {
    const app = {
      type: 'postgres',
      host: 'pgbouncer',
      port: 6432,
      username: 'app',
      password: 'pw',
      database: 'app',
      extra: { host: 'pgbouncer', statement_timeout: 1000 },
    } as DataSourceOptions;
    expect(directMigrationSource(app, DIRECT)).toEqual({
      type: 'postgres',
      url: DIRECT,
      extra: { statement_timeout: 1000 },
    });
    expect(directMigrationSource(app)).toBe(app);
  });

  it('routes a listener built from a pool config to the direct config', () => {
    const poolOptions = { connectionString: 'postgres://app@pgbouncer:6432/app' };
    const other = { connectionString: 'postgres://x@y/z' };
    const direct = directClientConfig(poolOptions, DIRECT);
    routeListeners(poolOptions, direct);
    expect(listenConfigFor(poolOptions)).toBe(direct);
    expect(listenConfigFor(other)).toBe(other);
  });
});
