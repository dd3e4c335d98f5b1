import 'reflect-metadata';
import { hostname } from 'node:os';
import { DataSource } from 'typeorm';
import { DurableExecutionError } from '../errors/durable-execution.error';
import { InvalidOptionsError } from '../errors/invalid-options.error';
import type { DurableExecutionModuleOptions } from './durable-execution-options.interface';
import { defaultWorkerId, resolveOptions } from './resolve-options';

const URL = 'postgres://root@127.0.0.1:5432/test';

/** Calls resolveOptions with anything (bad shapes included) and returns the error it throws. */
function failure(raw: unknown): InvalidOptionsError {
  try {
    resolveOptions(raw as DurableExecutionModuleOptions);
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidOptionsError);
    return err as InvalidOptionsError;
  }
  throw new Error(`resolveOptions accepted ${JSON.stringify(raw)}`);
}

describe('resolveOptions', () => {
  describe('defaults', () => {
    it('fills every default from { database: { url } } alone', () => {
      const resolved = resolveOptions({ database: { url: URL } });
      expect(resolved).toEqual({
        database: { url: URL, poolSize: 10, migrationsRun: true, dataSource: undefined },
        worker: {
          enabled: true,
          concurrency: 10,
          pollIntervalMs: 1000,
          leaseTtlMs: 30_000,
          heartbeatMs: 10_000,
          drainTimeoutMs: 10_000,
          workerId: expect.any(String),
        },
        reconciler: {
          enabled: true,
          intervalMs: 5000,
          batchSize: 100,
          backoffBaseMs: 1000,
          backoffMaxMs: 300_000,
        },
        limits: { maxInputBytes: 1024 * 1024, maxOutputBytes: 2 * 1024 * 1024 },
        defaultMaxAttempts: 5,
        defaultRetry: { maxAttempts: 3, initialDelayMs: 200, multiplier: 2, maxDelayMs: 10_000, jitter: 0.2 },
        redact: undefined,
        logRunData: false,
      });
      expect(resolved.worker.workerId).toMatch(new RegExp(`^${hostname()}:${process.pid}:[0-9a-f]{6}$`));
    });

    it('gives every resolution (so every module instance) its own worker id', () => {
      const ids = new Set([
        defaultWorkerId(),
        defaultWorkerId(),
        resolveOptions({ database: { url: URL } }).worker.workerId,
        resolveOptions({ database: { url: URL } }).worker.workerId,
      ]);
      expect(ids.size).toBe(4);
    });

    it('merges a partial group over the defaults of that group only', () => {
      const resolved = resolveOptions({
        database: { url: URL, poolSize: 3, migrationsRun: false },
        worker: { concurrency: 16, workerId: 'pod-a' },
        reconciler: { enabled: false },
        limits: { maxOutputBytes: 500 },
        defaultMaxAttempts: 9,
        defaultRetry: { jitter: 0 },
      });
      expect(resolved.database).toEqual({
        url: URL,
        poolSize: 3,
        migrationsRun: false,
        dataSource: undefined,
      });
      expect(resolved.worker).toEqual({
        enabled: true,
        concurrency: 16,
        pollIntervalMs: 1000,
        leaseTtlMs: 30_000,
        heartbeatMs: 10_000,
        drainTimeoutMs: 10_000,
        workerId: 'pod-a',
      });
      expect(resolved.reconciler).toMatchObject({ enabled: false, intervalMs: 5000, batchSize: 100 });
      expect(resolved.limits).toEqual({ maxInputBytes: 1024 * 1024, maxOutputBytes: 500 });
      expect(resolved.defaultMaxAttempts).toBe(9);
      expect(resolved.defaultRetry).toEqual({
        maxAttempts: 3,
        initialDelayMs: 200,
        multiplier: 2,
        maxDelayMs: 10_000,
        jitter: 0,
      });
    });

    it('treats undefined and null as "not given": they never override a default', () => {
      const resolved = resolveOptions({
        database: { url: URL, poolSize: undefined, migrationsRun: null },
        worker: { concurrency: null, workerId: undefined, leaseTtlMs: null },
        reconciler: { batchSize: null },
        limits: { maxInputBytes: null },
        defaultMaxAttempts: null,
        defaultRetry: { maxAttempts: undefined },
        redact: null,
      } as unknown as DurableExecutionModuleOptions);
      expect(resolved.database).toMatchObject({ poolSize: 10, migrationsRun: true });
      expect(resolved.worker.concurrency).toBe(10);
      expect(resolved.worker.leaseTtlMs).toBe(30_000);
      expect(resolved.worker.workerId).toMatch(/:[0-9a-f]{6}$/);
      expect(resolved.reconciler.batchSize).toBe(100);
      expect(resolved.limits.maxInputBytes).toBe(1024 * 1024);
      expect(resolved.defaultMaxAttempts).toBe(5);
      expect(resolved.defaultRetry.maxAttempts).toBe(3);
      expect(resolved.redact).toBeUndefined();
    });

    it('keeps a given DataSource and redact function as the very same objects', () => {
      const ds = new DataSource({ type: 'postgres', url: URL });
      const redact = (_type: string, payload: Record<string, unknown>) => payload;
      const resolved = resolveOptions({ database: { dataSource: ds }, redact });
      expect(resolved.database.dataSource).toBe(ds);
      expect(resolved.database.url).toBeUndefined();
      expect(resolved.redact).toBe(redact);
      expect(ds.isInitialized).toBe(false);
    });

    it('accepts a dataSourceName as the only source', () => {
      expect(resolveOptions({ database: { dataSourceName: 'default' } }).database).toEqual({
        dataSourceName: 'default',
        poolSize: 10,
        migrationsRun: true,
        dataSource: undefined,
      });
    });

    it('accepts a heartbeat just below the lease TTL', () => {
      const { worker } = resolveOptions({
        database: { url: URL },
        worker: { leaseTtlMs: 3000, heartbeatMs: 2999 },
      });
      expect(worker).toMatchObject({ leaseTtlMs: 3000, heartbeatMs: 2999 });
    });
  });

  describe('errors', () => {
    it('is an InvalidOptionsError with the stable code, a DurableExecutionError', () => {
      const err = failure({ database: {} });
      expect(err).toBeInstanceOf(DurableExecutionError);
      expect(err.code).toBe('DURABLE_INVALID_OPTIONS');
      expect(err.name).toBe('InvalidOptionsError');
      expect(err.message).toMatch(
        /^DurableExecutionModule options are invalid; fix these fields:\n {2}- database: /,
      );
    });

    it('names every bad field at once, each with its reason', () => {
      const err = failure({
        database: { url: URL },
        worker: { heartbeatMs: 40_000, leaseTtlMs: 30_000, concurrency: 0 },
      });
      expect(err.problems).toEqual([
        'worker.concurrency: concurrency must not be less than 1',
        'worker.heartbeatMs: must be below worker.leaseTtlMs (30000), ideally a third of it; got 40000',
      ]);
      for (const problem of err.problems) expect(err.message).toContain(`\n  - ${problem}`);
    });

    it('refuses a heartbeat equal to the lease TTL', () => {
      expect(
        failure({ database: { url: URL }, worker: { leaseTtlMs: 5000, heartbeatMs: 5000 } }).problems,
      ).toEqual([
        'worker.heartbeatMs: must be below worker.leaseTtlMs (5000), ideally a third of it; got 5000',
      ]);
    });

    it('says so when it is the default heartbeat that a short lease TTL conflicts with', () => {
      expect(failure({ database: { url: URL }, worker: { leaseTtlMs: 3000 } }).problems).toEqual([
        'worker.heartbeatMs: must be below worker.leaseTtlMs (3000), ideally a third of it; got 10000 (the default: set worker.heartbeatMs as well)',
      ]);
    });

    it.each([
      ['undefined', undefined],
      ['null', null],
      ['a string', 'postgres://x'],
      ['an array', [{ database: { url: URL } }]],
    ])('refuses options that are %s', (_label, raw) => {
      expect(failure(raw).problems).toEqual(['options: must be an object']);
    });

    it.each([
      ['missing', {}],
      ['null', { database: null }],
    ])('requires database (%s)', (_label, raw) => {
      expect(failure(raw).problems).toEqual([
        'database: database is required: give { url } or { dataSourceName } or { dataSource }',
      ]);
    });

    it('refuses a database that is not an object (a bare url string)', () => {
      expect(failure({ database: URL }).problems).toEqual([
        'database: must be an object, { url } or { dataSourceName } or { dataSource }; got string',
      ]);
    });

    it.each([
      ['url and dataSourceName', { url: URL, dataSourceName: 'default' }, 'url and dataSourceName'],
      [
        'url and dataSource',
        { url: URL, dataSource: new DataSource({ type: 'postgres', url: URL }) },
        'url and dataSource',
      ],
      [
        'all three',
        { url: URL, dataSourceName: 'x', dataSource: new DataSource({ type: 'postgres', url: URL }) },
        'url and dataSourceName and dataSource',
      ],
    ])('refuses two database sources (%s) and names them', (_label, database, named) => {
      expect(failure({ database }).problems).toEqual([
        `database: give exactly one of url, dataSourceName or dataSource; got ${named}`,
      ]);
    });

    it.each([
      ['empty', {}],
      ['an unset env variable', { url: undefined }],
      ['null', { url: null }],
    ])('refuses a database with no source (%s)', (_label, database) => {
      expect(failure({ database }).problems).toEqual([
        'database: give exactly one of url, dataSourceName or dataSource; got none (is the variable holding the url set?)',
      ]);
    });

    it('refuses an empty url and an empty dataSourceName', () => {
      expect(failure({ database: { url: '' } }).problems).toEqual([
        'database.url: url must be longer than or equal to 1 characters',
      ]);
      expect(failure({ database: { dataSourceName: '' } }).problems).toEqual([
        'database.dataSourceName: dataSourceName must be longer than or equal to 1 characters',
      ]);
    });

    it.each([
      ['a number', 5],
      ['a plain object', { options: { type: 'postgres' } }],
    ])('refuses a dataSource that is not a TypeORM DataSource (%s)', (_label, dataSource) => {
      expect(failure({ database: { dataSource } }).problems).toEqual([
        'database.dataSource: must be a TypeORM DataSource instance',
      ]);
    });

    it('refuses a DataSource of another database type', () => {
      // A real MySQL DataSource needs the mysql driver installed; its shape is all that is checked.
      const dataSource = Object.assign(Object.create(DataSource.prototype), {
        options: { type: 'mysql', url: 'mysql://root@127.0.0.1/x' },
      });
      expect(dataSource).toBeInstanceOf(DataSource);
      expect(failure({ database: { dataSource } }).problems).toEqual([
        "database.dataSource: must be a PostgreSQL DataSource (options.type 'postgres'); got 'mysql'",
      ]);
    });

    it('refuses unknown (misspelt) options at every level', () => {
      expect(
        failure({ database: { url: URL, pool: 3 }, workers: {}, worker: { concurency: 16 } }).problems.sort(),
      ).toEqual([
        'database.pool: unknown option (misspelt?)',
        'worker.concurency: unknown option (misspelt?)',
        'workers: unknown option (misspelt?)',
      ]);
    });

    it('refuses a reconciler backoff base above its cap', () => {
      expect(
        failure({ database: { url: URL }, reconciler: { backoffBaseMs: 10_000, backoffMaxMs: 5000 } })
          .problems,
      ).toEqual(['reconciler.backoffBaseMs: must not exceed reconciler.backoffMaxMs (5000); got 10000']);
    });

    it('refuses a redact that is not a function', () => {
      expect(failure({ database: { url: URL }, redact: 'yes' }).problems).toEqual([
        'redact: redact must be a function',
      ]);
    });

    it('refuses a group that is not an object', () => {
      expect(failure({ database: { url: URL }, worker: 5 }).problems).toEqual([
        'worker: nested property worker must be either object or array',
      ]);
    });

    it.each([
      ['database.poolSize', { database: { url: URL, poolSize: 0 } }, 'poolSize must not be less than 1'],
      [
        'database.poolSize',
        { database: { url: URL, poolSize: 1001 } },
        'poolSize must not be greater than 1000',
      ],
      [
        'database.migrationsRun',
        { database: { url: URL, migrationsRun: 'no' } },
        'migrationsRun must be a boolean value',
      ],
      [
        'worker.enabled',
        { database: { url: URL }, worker: { enabled: 'yes' } },
        'enabled must be a boolean value',
      ],
      [
        'worker.concurrency',
        { database: { url: URL }, worker: { concurrency: 2.5 } },
        'concurrency must be an integer number',
      ],
      [
        'worker.pollIntervalMs',
        { database: { url: URL }, worker: { pollIntervalMs: 5 } },
        'pollIntervalMs must not be less than 10',
      ],
      [
        'worker.leaseTtlMs',
        { database: { url: URL }, worker: { leaseTtlMs: 50, heartbeatMs: 20 } },
        'leaseTtlMs must not be less than 100',
      ],
      [
        'worker.drainTimeoutMs',
        { database: { url: URL }, worker: { drainTimeoutMs: -1 } },
        'drainTimeoutMs must not be less than 0',
      ],
      [
        'worker.workerId',
        { database: { url: URL }, worker: { workerId: '' } },
        'workerId must be longer than or equal to 1 characters',
      ],
      [
        'reconciler.intervalMs',
        { database: { url: URL }, reconciler: { intervalMs: 1 } },
        'intervalMs must not be less than 10',
      ],
      [
        'reconciler.batchSize',
        { database: { url: URL }, reconciler: { batchSize: 0 } },
        'batchSize must not be less than 1',
      ],
      [
        'limits.maxInputBytes',
        { database: { url: URL }, limits: { maxInputBytes: 0 } },
        'maxInputBytes must not be less than 1',
      ],
      [
        'defaultMaxAttempts',
        { database: { url: URL }, defaultMaxAttempts: 0 },
        'defaultMaxAttempts must not be less than 1',
      ],
      [
        'defaultRetry.jitter',
        { database: { url: URL }, defaultRetry: { jitter: 2 } },
        'jitter must not be greater than 1',
      ],
      [
        'defaultRetry.multiplier',
        { database: { url: URL }, defaultRetry: { multiplier: 0.5 } },
        'multiplier must not be less than 1',
      ],
      [
        'defaultRetry.maxAttempts',
        { database: { url: URL }, defaultRetry: { maxAttempts: 0 } },
        'maxAttempts must not be less than 1',
      ],
    ])('refuses a bad %s', (field, raw, why) => {
      expect(failure(raw).problems).toEqual([`${field}: ${why}`]);
    });
  });
});
