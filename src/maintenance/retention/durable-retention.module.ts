import { DynamicModule, FactoryProvider, Module, ModuleMetadata } from '@nestjs/common';
import { InvalidOptionsError } from '../../errors/invalid-options.error';
import { DURABLE_RETENTION_OPTIONS, DurableRetention } from './durable-retention.service';
import { RetentionStore } from '../../store/retention.store';
import { EventPartitionsStore } from '../../store/event-partitions.store';
import { DurableJobs } from '../../engine/durable-jobs';
import { cronProblem } from '../../util/cron';
import type { DurableRetentionOptions, ResolvedRetentionOptions } from './retention-options.interface';

const HOUR = 3_600_000;

/** Validates and fills in the retention options; every problem is listed at once. @internal */
export function resolveRetentionOptions(o: DurableRetentionOptions): ResolvedRetentionOptions {
  const problems: string[] = [];
  const positive = (name: string, v: unknown, optional = false) => {
    if (optional && v === undefined) return;
    if (typeof v !== 'number' || !Number.isInteger(v) || v <= 0) {
      problems.push(`retention.${name} must be a positive integer (got ${String(v)})`);
    }
  };
  positive('pruneAfterMs', o?.pruneAfterMs);
  positive('deleteRunsAfterMs', o?.deleteRunsAfterMs, true);
  positive('batchSize', o?.batchSize, true);
  positive('maxBatchesPerSweep', o?.maxBatchesPerSweep, true);
  positive('intervalMs', o?.intervalMs, true);
  if (o?.cron !== undefined) {
    const problem = cronProblem(o.cron);
    if (problem) problems.push(`retention.cron ${problem}`);
    if (o.intervalMs !== undefined) problems.push('retention.cron cannot be given with retention.intervalMs');
  }
  if (problems.length) throw new InvalidOptionsError(problems);
  return {
    pruneAfterMs: o.pruneAfterMs,
    deleteRunsAfterMs: o.deleteRunsAfterMs,
    batchSize: o.batchSize ?? 500,
    maxBatchesPerSweep: o.maxBatchesPerSweep ?? 1000,
    intervalMs: o.intervalMs ?? HOUR,
    ...(o.cron !== undefined ? { cron: o.cron } : {}),
    enabled: o.enabled ?? true,
    eventPartitions: o.eventPartitions ?? true,
  };
}

/**
 * Retention of the event trail: deletes the checkpoints, events and signals of finished runs past an
 * age, in batches, on an interval. Import next to `DurableExecutionModule` (which must be global, the
 * default) in one or more processes; sweeps on several pods at once are safe.
 * @example
 * ```ts
 * DurableRetentionModule.forRoot({ pruneAfterMs: 30 * 24 * 3600e3, deleteRunsAfterMs: 365 * 24 * 3600e3 })
 * ```
 */
@Module({})
export class DurableRetentionModule {
  static forRoot(options: DurableRetentionOptions): DynamicModule {
    const resolved = resolveRetentionOptions(options);
    return {
      module: DurableRetentionModule,
      providers: [
        { provide: DURABLE_RETENTION_OPTIONS, useValue: resolved },
        DurableRetention,
        RetentionStore,
        EventPartitionsStore,
        DurableJobs,
      ],
      exports: [DurableRetention],
    };
  }

  /**
   * The same, with options from a factory (e.g. from ConfigService). They are validated when the
   * factory resolves: bad options fail the app's bootstrap with every problem listed.
   * @example
   * ```ts
   * DurableRetentionModule.forRootAsync({
   *   inject: [ConfigService],
   *   useFactory: (config: ConfigService) => ({ pruneAfterMs: config.getOrThrow<number>('RETENTION_MS') }),
   * })
   * ```
   */
  static forRootAsync(options: DurableRetentionAsyncOptions): DynamicModule {
    return {
      module: DurableRetentionModule,
      imports: options.imports ?? [],
      providers: [
        {
          provide: DURABLE_RETENTION_OPTIONS,
          useFactory: async (...deps: unknown[]) =>
            resolveRetentionOptions(await options.useFactory(...deps)),
          inject: options.inject ?? [],
        },
        DurableRetention,
        RetentionStore,
        EventPartitionsStore,
        DurableJobs,
      ],
      exports: [DurableRetention],
    };
  }
}

/** Options of `DurableRetentionModule.forRootAsync`. */
export interface DurableRetentionAsyncOptions extends Pick<ModuleMetadata, 'imports'> {
  inject?: FactoryProvider['inject'];
  useFactory: (...deps: any[]) => DurableRetentionOptions | Promise<DurableRetentionOptions>;
}
