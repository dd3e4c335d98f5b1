import 'reflect-metadata';
import { hostname } from 'node:os';
import { DataSource } from 'typeorm';
import { URL } from '../../test/helpers/options';
import type { DurableExecutionModuleOptions } from './durable-execution-options.interface';
import { defaultWorkerId, resolveOptions } from './resolve-options';

/** resolveOptions: the defaults, and what a partial group or an unset value resolves to. */
describe('resolveOptions', () => {
  describe('defaults', () => {
    it('fills every default from { database: { url } } alone', () => {
      const resolved = resolveOptions({ database: { url: URL } });
      expect(resolved).toEqual({
        database: {
          url: URL,
          poolSize: 10,
          migrationsRun: true,
          schema: 'public',
          preparedStatements: true,
          dataSource: undefined,
        },
        worker: {
          enabled: true,
          concurrency: 10,
          pollIntervalMs: 1000,
          leaseTtlMs: 30_000,
          heartbeatMs: 10_000,
          drainTimeoutMs: 10_000,
          groupCommit: 2,
          workerId: expect.any(String),
          presenceIntervalMs: 10_000,
          fencedTransport: true,
          lateCallGraceMs: 30_000,
          wireMarginMs: 3000, // a tenth of the lease
          handoffLeaseMs: 5000, // a sixth of the lease
        },
        reconciler: {
          enabled: true,
          intervalMs: 5000,
          batchSize: 100,
          backoffBaseMs: 1000,
          backoffMaxMs: 300_000,
        },
        limits: {
          maxInputBytes: 1024 * 1024,
          maxOutputBytes: 2 * 1024 * 1024,
          maxShownValueBytes: 64 * 1024,
          maxStreamClients: 1000,
          maxPendingSignals: 3000,
          maxPendingSignalsPerName: 1000,
          minScheduleIntervalMs: 60_000,
        },
        defaultMaxAttempts: 5,
        defaultRetry: { maxAttempts: 3, initialDelayMs: 200, multiplier: 2, maxDelayMs: 10_000, jitter: 0.2 },
        defaultTimeoutMs: 600_000,
        redact: undefined,
        logRunData: false,
        unservedKinds: 'warn',
        unkeyedStarts: 'warn',
        budgets: {},
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
        schema: 'public',
        preparedStatements: true,
        dataSource: undefined,
      });
      expect(resolved.worker).toEqual({
        enabled: true,
        concurrency: 16,
        pollIntervalMs: 1000,
        leaseTtlMs: 30_000,
        heartbeatMs: 10_000,
        drainTimeoutMs: 10_000,
        groupCommit: 2,
        workerId: 'pod-a',
        presenceIntervalMs: 10_000,
        lateCallGraceMs: 30_000,
        fencedTransport: true,
        wireMarginMs: 3000,
        handoffLeaseMs: 5000,
      });
      expect(resolved.reconciler).toMatchObject({ enabled: false, intervalMs: 5000, batchSize: 100 });
      expect(resolved.limits).toEqual({
        maxInputBytes: 1024 * 1024,
        maxOutputBytes: 500,
        maxShownValueBytes: 64 * 1024,
        maxStreamClients: 1000,
        maxPendingSignals: 3000,
        maxPendingSignalsPerName: 1000,
        minScheduleIntervalMs: 60_000,
      });
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
      expect(resolved.database).toMatchObject({ poolSize: 10, migrationsRun: true, schema: 'public' });
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
        schema: 'public',
        preparedStatements: true,
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

    it('gives a hand-off a sixth of the lease, at least a second, at most half of it; 0 turns it off', () => {
      const handoff = (worker: Record<string, number>) =>
        resolveOptions({ database: { url: URL }, worker: { heartbeatMs: 100, ...worker } }).worker
          .handoffLeaseMs;
      expect(handoff({ leaseTtlMs: 60_000 })).toBe(10_000);
      expect(handoff({ leaseTtlMs: 3000 })).toBe(1000);
      expect(handoff({ leaseTtlMs: 1500 })).toBe(750);
      expect(handoff({ leaseTtlMs: 30_000, handoffLeaseMs: 0 })).toBe(0);
      expect(handoff({ leaseTtlMs: 30_000, handoffLeaseMs: 15_000 })).toBe(15_000);
    });
  });
});
