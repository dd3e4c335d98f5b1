import { plainToInstance } from 'class-transformer';
import { validateSync, ValidationError } from 'class-validator';
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { InvalidOptionsError } from '../errors/invalid-options.error';
import type {
  DurableExecutionModuleOptions,
  ResolvedDurableOptions,
} from './durable-execution-options.interface';
import { DurableExecutionOptionsSchema } from './durable-execution-options.schema';

/** A fresh worker identity: host, pid and a random suffix (two processes never share one). */
export function defaultWorkerId(): string {
  return `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
}

function flatten(errors: ValidationError[], prefix = ''): string[] {
  const out: string[] = [];
  for (const e of errors) {
    const path = prefix ? `${prefix}.${e.property}` : e.property;
    for (const msg of Object.values(e.constraints ?? {})) out.push(`${path}: ${msg}`);
    if (e.children?.length) out.push(...flatten(e.children, path));
  }
  return out;
}

/**
 * Validates raw options and merges defaults once. Throws InvalidOptionsError naming every bad field,
 * including cross-field rules (`heartbeatMs` below `leaseTtlMs`, exactly one database source).
 */
export function resolveOptions(raw: DurableExecutionModuleOptions): ResolvedDurableOptions {
  if (raw === null || typeof raw !== 'object') throw new InvalidOptionsError(['options: must be an object']);
  const { dataSource, ...database } = raw.database ?? ({} as DurableExecutionModuleOptions['database']);
  // The DataSource instance is not a plain object; keep it out of class-transformer's reach.
  const schema = plainToInstance(DurableExecutionOptionsSchema, {
    ...raw,
    database: raw.database && database,
  });
  const problems = flatten(validateSync(schema, { forbidUnknownValues: false }));

  const sources = [database.url, database.dataSourceName, dataSource].filter((v) => v !== undefined).length;
  if (raw.database && sources !== 1) {
    problems.push('database: give exactly one of url, dataSourceName or dataSource');
  }
  const worker = {
    enabled: true,
    concurrency: 10,
    pollIntervalMs: 1000,
    leaseTtlMs: 30_000,
    heartbeatMs: 10_000,
    drainTimeoutMs: 10_000,
    workerId: defaultWorkerId(),
    ...stripUndefined(raw.worker),
  };
  if (Number.isFinite(worker.heartbeatMs) && worker.heartbeatMs >= worker.leaseTtlMs) {
    problems.push(
      `worker.heartbeatMs: must be below worker.leaseTtlMs (${worker.leaseTtlMs}), ideally a third of it; got ${worker.heartbeatMs}`,
    );
  }
  const reconciler = {
    enabled: true,
    intervalMs: 5000,
    batchSize: 100,
    backoffBaseMs: 1000,
    backoffMaxMs: 300_000,
    ...stripUndefined(raw.reconciler),
  };
  if (reconciler.backoffBaseMs > reconciler.backoffMaxMs) {
    problems.push('reconciler.backoffBaseMs: must not exceed reconciler.backoffMaxMs');
  }
  const defaultRetry = {
    maxAttempts: 3,
    initialDelayMs: 200,
    multiplier: 2,
    maxDelayMs: 10_000,
    jitter: 0.2,
    ...stripUndefined(raw.defaultRetry),
  };
  if (problems.length) throw new InvalidOptionsError(problems);

  return {
    database: { poolSize: 10, migrationsRun: true, ...stripUndefined(database), dataSource },
    worker,
    reconciler,
    limits: { maxInputBytes: 1 << 20, maxOutputBytes: 2 << 20, ...stripUndefined(raw.limits) },
    defaultMaxAttempts: raw.defaultMaxAttempts ?? 5,
    defaultRetry,
    redact: raw.redact,
  };
}

function stripUndefined<T extends object>(o: T | undefined): Partial<T> {
  if (!o) return {};
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
