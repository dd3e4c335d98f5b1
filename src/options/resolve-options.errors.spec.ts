import 'reflect-metadata';
import { DurableExecutionError } from '../errors/durable-execution.error';
import { failure, URL } from '../../test/helpers/options';

/** resolveOptions: the error it throws, and every bad field outside the `database` group. */
describe('resolveOptions', () => {
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

    it('refuses a hand-off lease above half of the lease TTL', () => {
      expect(
        failure({
          database: { url: URL },
          worker: { leaseTtlMs: 6000, heartbeatMs: 2000, handoffLeaseMs: 3001 },
        }).problems,
      ).toEqual(['worker.handoffLeaseMs: must not exceed half of worker.leaseTtlMs (6000); got 3001']);
    });

    it('refuses a heartbeat equal to the lease TTL', () => {
      expect(
        failure({ database: { url: URL }, worker: { leaseTtlMs: 5000, heartbeatMs: 5000 } }).problems,
      ).toEqual([
        'worker.heartbeatMs: must be below worker.leaseTtlMs (5000), ideally a third of it; got 5000',
      ]);
    });

    it('refuses a wire margin of a third of the lease or more (every request would be refused)', () => {
      expect(
        failure({
          database: { url: URL },
          worker: { leaseTtlMs: 3000, heartbeatMs: 1000, wireMarginMs: 1000 },
        }).problems,
      ).toEqual(['worker.wireMarginMs: must be below a third of worker.leaseTtlMs (3000); got 1000']);
      expect(failure({ database: { url: URL }, worker: { wireMarginMs: -1 } }).problems).toEqual([
        'worker.wireMarginMs: wireMarginMs must not be less than 0',
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
        'worker.presenceIntervalMs',
        { database: { url: URL }, worker: { presenceIntervalMs: 50 } },
        'presenceIntervalMs must not be less than 100',
      ],
      [
        'unservedKinds',
        { database: { url: URL }, unservedKinds: 'ignore' },
        'unservedKinds must be one of the following values: warn, refuse',
      ],
      [
        'worker.leaseTtlMs',
        { database: { url: URL }, worker: { leaseTtlMs: 50, heartbeatMs: 20 } },
        'leaseTtlMs must not be less than 100',
      ],
      [
        'worker.groupCommit',
        { database: { url: URL }, worker: { groupCommit: -1 } },
        'groupCommit must not be less than 0',
      ],
      [
        'worker.drainTimeoutMs',
        { database: { url: URL }, worker: { drainTimeoutMs: -1 } },
        'drainTimeoutMs must not be less than 0',
      ],
      [
        'worker.lateCallGraceMs',
        { database: { url: URL }, worker: { lateCallGraceMs: -1 } },
        'lateCallGraceMs must not be less than 0',
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
        'reconciler.cron',
        { database: { url: URL }, reconciler: { cron: 'every five seconds' } },
        'is not a cron expression (Unknown alias: eve)',
      ],
      [
        'reconciler.cron',
        { database: { url: URL }, reconciler: { cron: '*/5 * * * * *', intervalMs: 5000 } },
        'cannot be given with reconciler.intervalMs (one cadence)',
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
        'limits.maxStreamClients',
        { database: { url: URL }, limits: { maxStreamClients: 0 } },
        'maxStreamClients must not be less than 1',
      ],
      [
        'limits.maxPendingSignals',
        { database: { url: URL }, limits: { maxPendingSignals: 0 } },
        'maxPendingSignals must not be less than 1',
      ],
      [
        'limits.maxPendingSignalsPerName',
        { database: { url: URL }, limits: { maxPendingSignalsPerName: 1.5 } },
        'maxPendingSignalsPerName must be an integer number',
      ],
      [
        'limits.maxPendingSignalsPerName',
        { database: { url: URL }, limits: { maxPendingSignals: 10, maxPendingSignalsPerName: 20 } },
        'must not exceed limits.maxPendingSignals (10); got 20',
      ],
      [
        'limits.minScheduleIntervalMs',
        { database: { url: URL }, limits: { minScheduleIntervalMs: -1 } },
        'minScheduleIntervalMs must not be less than 0',
      ],
      [
        'defaultMaxAttempts',
        { database: { url: URL }, defaultMaxAttempts: 0 },
        'defaultMaxAttempts must not be less than 1',
      ],
      [
        'defaultTimeoutMs',
        { database: { url: URL }, defaultTimeoutMs: 1.5 },
        'defaultTimeoutMs must be an integer number',
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
