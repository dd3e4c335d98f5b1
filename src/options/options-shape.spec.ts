import 'reflect-metadata';
import { getMetadataStorage } from 'class-validator';
import {
  DatabaseOptionsSchema,
  DurableExecutionOptionsSchema,
  LimitOptionsSchema,
  ReconcilerOptionsSchema,
  RetryPolicySchema,
  WorkerOptionsSchema,
} from './durable-execution-options.schema';
import { OPTION_SHAPES, optionsLookValid, TOP_OPTION_SHAPE } from './options-shape';
import { optionProblems } from './options-validation';

/**
 * optionsLookValid lets a boot with valid options skip class-validator (issue 47: a worker boots like
 * a plain Nest app). It may be unsure of options class-validator accepts, never sure of options it
 * refuses.
 */
describe('optionsLookValid', () => {
  const propertiesOf = (schema: new () => object) =>
    [
      ...new Set(
        getMetadataStorage()
          .getTargetValidationMetadatas(schema, '', true, false)
          .map((m) => m.propertyName),
      ),
    ].sort();

  it("names every property of the schema's classes, and no other", () => {
    for (const schema of [
      RetryPolicySchema,
      DatabaseOptionsSchema,
      WorkerOptionsSchema,
      ReconcilerOptionsSchema,
      LimitOptionsSchema,
    ]) {
      expect([
        schema.name,
        ...Object.keys(OPTION_SHAPES[schema.name as keyof typeof OPTION_SHAPES]).sort(),
      ]).toEqual([schema.name, ...propertiesOf(schema)]);
    }
    expect(Object.keys(TOP_OPTION_SHAPE).sort()).toEqual(propertiesOf(DurableExecutionOptionsSchema));
  });

  it('is sure of the options the docs and examples give', () => {
    const url = 'postgres://user:secret@db:5432/app';
    for (const options of [
      { database: { url } },
      { database: { dataSourceName: 'default', migrationsRun: false } },
      { database: { url, poolSize: 10, schema: 'durable', directUrl: url, preparedStatements: false } },
      {
        database: { url },
        worker: {
          concurrency: 16,
          leaseTtlMs: 6000,
          heartbeatMs: 1000,
          drainTimeoutMs: 1500,
          workerId: 'pod-1',
        },
        reconciler: { intervalMs: 500, backoffBaseMs: 100, enabled: true },
        limits: { maxInputBytes: 1 << 20, maxPendingSignals: 3000 },
        defaultRetry: { maxAttempts: 5, initialDelayMs: 100, multiplier: 1.5, jitter: 0.2 },
        defaultMaxAttempts: 3,
        defaultTimeoutMs: 60_000,
        redact: (v: unknown) => v,
        logRunData: false,
        unservedKinds: 'refuse',
        unkeyedStarts: 'warn',
      },
      { database: { url }, worker: { enabled: false }, reconciler: { cron: '*/10 * * * * *' } },
      { database: { url }, worker: undefined, limits: null },
    ]) {
      expect(optionProblems(options)).toEqual([]);
      expect(optionsLookValid(options)).toBe(true);
    }
  });

  class Instance {
    enabled = true;
  }
  /** Values of every type and edge: each property gets each of them. */
  const VALUES: unknown[] = [
    ...[0, 1, -1, 0.5, 1.5, 2, 9, 10, 11, 99, 100, 101, 999, 1000, 1001, 9999, 10_000, 10_001],
    ...[1e9, 1e9 + 1, 2 ** 53, -0, NaN, Infinity, -Infinity, Number.MIN_VALUE],
    ...['', ' ', 'x', '\uFE0F', '\uD83D\uDE00', '\u00e9', '5', 'warn', 'refuse', 'WARN'],
    ...['public', 'durable', 'pg_x', 'Durable', 'information_schema', 'postgres://u@h:5432/db', '* * * * *'],
    ...[true, false, [], [1], {}, { enabled: true }, new Instance(), new Date(0), () => 1, Symbol('s')],
    ...[new Number(5), new String('x'), new Boolean(true), Object.create(null)],
  ];
  const GROUPS: Record<string, Record<string, (v: unknown) => boolean>> = {
    database: OPTION_SHAPES.DatabaseOptionsSchema,
    worker: OPTION_SHAPES.WorkerOptionsSchema,
    reconciler: OPTION_SHAPES.ReconcilerOptionsSchema,
    limits: OPTION_SHAPES.LimitOptionsSchema,
    defaultRetry: OPTION_SHAPES.RetryPolicySchema,
  };
  /** The implication under test, counted: sure means class-validator finds nothing. */
  const check = (options: Record<string, unknown>): number => {
    if (!optionsLookValid(options)) return 0;
    expect({ options, problems: optionProblems(options) }).toEqual({ options, problems: [] });
    return 1;
  };

  it('is never sure of a value class-validator refuses, property by property', () => {
    let sure = 0;
    for (const value of VALUES) {
      for (const [key, table] of Object.entries(GROUPS)) {
        for (const property of Object.keys(table)) {
          const group = { [property]: value };
          sure += check(key === 'database' ? { database: group } : { database: { url: 'x' }, [key]: group });
        }
        if (key !== 'database') sure += check({ database: { url: 'x' }, [key]: value });
      }
      for (const key of Object.keys(TOP_OPTION_SHAPE))
        if (!(key in GROUPS)) sure += check({ database: { url: 'x' }, [key]: value });
      sure += check({ database: value });
    }
    expect(sure).toBeGreaterThan(500); // enough cases it was sure of
  });

  it('is never sure of options class-validator refuses (generated combinations)', () => {
    let seed = 47; // mulberry32
    const random = () => {
      seed = (seed + 0x6d2b79f5) | 0;
      let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
    };
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)];
    const valueFor = (rule: (v: unknown) => boolean) => {
      const fitting = VALUES.filter((v) => rule(v));
      return fitting.length && random() < 0.9 ? pick(fitting) : pick([undefined, null, ...VALUES]);
    };
    const groupFor = (table: Record<string, (v: unknown) => boolean>): unknown => {
      if (random() < 0.03) return pick([[], 'x', 5, new Instance(), Object.create(null)]);
      const o: Record<string, unknown> = {};
      for (const [key, rule] of Object.entries(table)) if (random() < 0.5) o[key] = valueFor(rule);
      if (random() < 0.03) o[pick(['enabeld', 'url2', '__proto__', 'constructor'])] = 1;
      return o;
    };
    let sure = 0;
    for (let i = 0; i < 3000; i++) {
      const options: Record<string, unknown> = {};
      for (const [key, rule] of Object.entries(TOP_OPTION_SHAPE)) {
        if (key !== 'database' && random() < 0.5) continue;
        options[key] = key in GROUPS ? groupFor(GROUPS[key]) : valueFor(rule);
      }
      if (random() < 0.03) options[pick(['workers', 'isGlobal', 'budget'])] = pick(VALUES);
      sure += check(options);
    }
    expect(sure).toBeGreaterThan(300); // enough cases it was sure of
  });
});
