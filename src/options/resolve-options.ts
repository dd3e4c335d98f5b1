import { cronProblem } from '../util/cron';
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { InvalidOptionsError } from '../errors/invalid-options.error';
import { resolveBudgets } from './budgets';
import type {
  DurableExecutionModuleOptions,
  ResolvedDurableOptions,
} from './durable-execution-options.interface';
import { optionsLookValid } from './options-shape';
import { resolveFenceKey } from './fence-key';
import { DEFAULT_SCHEMA } from './schema-name';

/** A fresh worker identity: host, pid and a random suffix (two processes never share one). */
export function defaultWorkerId(): string {
  return `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
}

/** A plain object (not null, not an array): the shape every options group must have. */
function isRecord(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** Problems with `database.dataSource`, which class-validator never sees (it is not a plain object). */
function dataSourceProblems(ds: unknown): string[] {
  if (ds === undefined || ds === null) return [];
  const candidate = ds as { initialize?: unknown; options?: { type?: unknown } };
  if (typeof ds !== 'object' || typeof candidate.initialize !== 'function' || !isRecord(candidate.options)) {
    return ['database.dataSource: must be a TypeORM DataSource instance'];
  }
  if (candidate.options.type !== 'postgres') {
    return [
      `database.dataSource: must be a PostgreSQL DataSource (options.type 'postgres'); got '${String(candidate.options.type)}'`,
    ];
  }
  return [];
}

/**
 * Validates raw options and merges defaults once. Throws InvalidOptionsError naming every bad field,
 * including cross-field rules (`heartbeatMs` below `leaseTtlMs`, exactly one database source) and
 * unknown keys (a misspelt option would otherwise be ignored silently). `null` counts as "not given"
 * everywhere, as for class-validator's `@IsOptional`, so it never overrides a default.
 */
export function resolveOptions(raw: DurableExecutionModuleOptions): ResolvedDurableOptions {
  if (!isRecord(raw)) throw new InvalidOptionsError(['options: must be an object']);
  const rawDb: unknown = raw.database;
  const dbGiven = isRecord(rawDb);
  const dbMissing = rawDb === undefined || rawDb === null;
  // The DataSource instance is not a plain object; keep it out of class-transformer's reach.
  const { dataSource, ...database } = (dbGiven ? rawDb : {}) as DurableExecutionModuleOptions['database'];
  // A non-object `database` (a bare url string, say) is reported below; class-validator would call it missing.
  // Budgets are a map by name: checked by resolveBudgets, not by the class schema; the fence key holds
  // a secret (a Buffer class-transformer would mangle): checked by resolveFenceKey.
  const { budgets: rawBudgets, fence: rawFence, ...rest } = raw;
  const checked = { ...rest, database: dbGiven || !dbMissing ? database : undefined };
  // class-validator only when the quick look is not sure: a valid boot loads none of it (options-shape.ts).
  const problems = optionsLookValid(checked) ? [] : classValidatorProblems(checked);
  if (!dbGiven && !dbMissing) {
    problems.unshift(
      `database: must be an object, { url } or { dataSourceName } or { dataSource }; got ${Array.isArray(rawDb) ? 'an array' : typeof rawDb}`,
    );
  }

  if (dbGiven) {
    const given = (
      [
        ['url', database.url],
        ['dataSourceName', database.dataSourceName],
        ['dataSource', dataSource],
      ] as const
    )
      .filter(([, v]) => v !== undefined && v !== null)
      .map(([k]) => k);
    if (given.length !== 1) {
      problems.push(
        `database: give exactly one of url, dataSourceName or dataSource; got ${
          given.length ? given.join(' and ') : 'none (is the variable holding the url set?)'
        }`,
      );
    }
    problems.push(...dataSourceProblems(dataSource));
    for (const key of ['url', 'directUrl'] as const) {
      const urlProblem = databaseUrlProblem(database[key]);
      if (urlProblem) problems.push(`database.${key}: ${urlProblem}`);
    }
  }
  const worker = {
    enabled: true,
    concurrency: 10,
    pollIntervalMs: 1000,
    leaseTtlMs: 30_000,
    heartbeatMs: 10_000,
    drainTimeoutMs: 10_000,
    groupCommit: 2,
    workerId: defaultWorkerId(),
    presenceIntervalMs: 10_000,
    fencedTransport: true,
    lateCallGraceMs: 30_000,
    ...stripUnset(raw.worker),
  } as Omit<ResolvedDurableOptions['worker'], 'wireMarginMs' | 'handoffLeaseMs'> & {
    wireMarginMs?: number;
    handoffLeaseMs?: number;
  };
  const wireMarginMs = worker.wireMarginMs ?? Math.round(worker.leaseTtlMs / 10);
  const halfLease = Math.floor(worker.leaseTtlMs / 2);
  const handoffLeaseMs =
    worker.handoffLeaseMs ?? Math.min(halfLease, Math.max(1000, Math.round(worker.leaseTtlMs / 6)));
  if (Number.isFinite(worker.leaseTtlMs) && handoffLeaseMs > halfLease)
    problems.push(
      `worker.handoffLeaseMs: must not exceed half of worker.leaseTtlMs (${worker.leaseTtlMs}); got ${handoffLeaseMs}`,
    );
  if (Number.isFinite(worker.leaseTtlMs) && !(wireMarginMs < worker.leaseTtlMs / 3))
    problems.push(
      `worker.wireMarginMs: must be below a third of worker.leaseTtlMs (${worker.leaseTtlMs}); got ${wireMarginMs}`,
    );
  if (
    Number.isFinite(worker.heartbeatMs) &&
    Number.isFinite(worker.leaseTtlMs) &&
    worker.heartbeatMs >= worker.leaseTtlMs
  ) {
    const own =
      isRecord(raw.worker) && raw.worker.heartbeatMs !== undefined && raw.worker.heartbeatMs !== null;
    problems.push(
      `worker.heartbeatMs: must be below worker.leaseTtlMs (${worker.leaseTtlMs}), ideally a third of it; got ${
        worker.heartbeatMs
      }${own ? '' : ' (the default: set worker.heartbeatMs as well)'}`,
    );
  }
  const reconciler = {
    enabled: true,
    intervalMs: 5000,
    batchSize: 100,
    backoffBaseMs: 1000,
    backoffMaxMs: 300_000,
    ...stripUnset(raw.reconciler),
  };
  if (isRecord(raw.reconciler) && typeof raw.reconciler.cron === 'string') {
    const problem = cronProblem(raw.reconciler.cron);
    if (problem) problems.push(`reconciler.cron: ${problem}`);
    if (raw.reconciler.intervalMs !== undefined && raw.reconciler.intervalMs !== null)
      problems.push('reconciler.cron: cannot be given with reconciler.intervalMs (one cadence)');
  }
  if (reconciler.backoffBaseMs > reconciler.backoffMaxMs) {
    problems.push(
      `reconciler.backoffBaseMs: must not exceed reconciler.backoffMaxMs (${reconciler.backoffMaxMs}); got ${reconciler.backoffBaseMs}`,
    );
  }
  const defaultRetry = {
    maxAttempts: 3,
    initialDelayMs: 200,
    multiplier: 2,
    maxDelayMs: 10_000,
    jitter: 0.2,
    ...stripUnset(raw.defaultRetry),
  };
  const budgets = resolveBudgets(rawBudgets, problems);
  const givenLimits = stripUnset(raw.limits);
  const maxPendingSignals = givenLimits.maxPendingSignals ?? 3000;
  const limits = {
    maxInputBytes: 1 << 20,
    maxOutputBytes: 2 << 20,
    maxShownValueBytes: 64 << 10,
    maxStreamClients: 1000,
    maxPendingSignals,
    maxPendingSignalsPerName: Math.min(1000, maxPendingSignals),
    minScheduleIntervalMs: 60_000,
    ...givenLimits,
  };
  if ((givenLimits.maxPendingSignalsPerName ?? 0) > maxPendingSignals)
    problems.push(
      `limits.maxPendingSignalsPerName: must not exceed limits.maxPendingSignals (${maxPendingSignals}); got ${givenLimits.maxPendingSignalsPerName}`,
    );
  const fence = resolveFenceKey(rawFence, problems);
  if (problems.length) throw new InvalidOptionsError(problems);

  return {
    database: {
      poolSize: 10,
      migrationsRun: true,
      schema: DEFAULT_SCHEMA,
      preparedStatements: true,
      ...stripUnset(database),
      dataSource: dataSource ?? undefined,
    },
    worker: { ...worker, wireMarginMs, handoffLeaseMs },
    reconciler,
    limits,
    defaultMaxAttempts: raw.defaultMaxAttempts ?? 5,
    defaultRetry,
    defaultTimeoutMs: raw.defaultTimeoutMs ?? 600_000,
    redact: raw.redact ?? undefined,
    logRunData: raw.logRunData ?? false,
    unservedKinds: raw.unservedKinds ?? 'warn',
    unkeyedStarts: raw.unkeyedStarts ?? 'warn',
    budgets,
    fence,
  };
}

/** class-validator's problems with the options, loaded on first use (options-validation.ts). */
function classValidatorProblems(options: Record<string, unknown>): string[] {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { optionProblems } = require('./options-validation') as typeof import('./options-validation');
  return optionProblems(options);
}

/** Drops `undefined` and `null` entries so they never override a default. */
function stripUnset<T extends object>(o: T | undefined): Partial<T> {
  if (!isRecord(o)) return {};
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined && v !== null)) as Partial<T>;
}

/** Why a `database.url` can never work (not a URL, not postgres), or null. Never quotes the URL (it may hold a password). */
function databaseUrlProblem(url: unknown): string | null {
  if (typeof url !== 'string' || !url) return null; // missing or not a string: reported elsewhere
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return 'is not a URL; give postgres://user:password@host:5432/database';
  }
  if (parsed.protocol !== 'postgres:' && parsed.protocol !== 'postgresql:')
    return `must be a postgres:// or postgresql:// URL; got ${parsed.protocol}// (give postgres://user:password@host:5432/database)`;
  return null;
}
