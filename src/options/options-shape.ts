import { schemaNameProblem } from './schema-name';

/**
 * A quick look at the module options before class-validator: true only when every group and value has
 * the shape `DurableExecutionOptionsSchema` accepts (rules written out below, one per decorator), so
 * that a boot with valid options never loads class-validator and class-transformer (about 350 modules,
 * a tenth of a second of CPU; issue 47). It may say false to options class-validator would accept (a
 * class instance as a group, an unusual string): then class-validator decides and words the problems, as
 * it always did. It must never say true to options class-validator refuses: options-shape.spec.ts checks
 * that over generated options, and that these tables name the schema's properties.
 * @internal
 */
export function optionsLookValid(options: Record<string, unknown>): boolean {
  if (!isPlain(options.database)) return false; // required: @IsObject
  return fits(options, TOP);
}

type Rule = (v: unknown) => boolean;

const isNumber = (v: unknown): v is number => typeof v === 'number';
/** `@IsInt()` with `@Min(min)` / `@Max(max)` when given. */
const int =
  (min?: number, max?: number): Rule =>
  (v) =>
    isNumber(v) && Number.isInteger(v) && (min === undefined || v >= min) && (max === undefined || v <= max);
/** `@IsNumber()` (NaN and infinities refused by default) with `@Min` / `@Max`. */
const num =
  (min: number, max?: number): Rule =>
  (v) =>
    isNumber(v) && Number.isFinite(v) && v >= min && (max === undefined || v <= max);
const bool: Rule = (v) => typeof v === 'boolean';
const str: Rule = (v) => typeof v === 'string';
/** `@IsString() @MinLength(1)`: one printable ASCII character surely counts (validator's isLength). */
const nonEmpty: Rule = (v) => typeof v === 'string' && /[\x20-\x7e]/.test(v);
const oneOf =
  (...values: string[]): Rule =>
  (v) =>
    typeof v === 'string' && values.includes(v);
const schemaName: Rule = (v) => schemaNameProblem(v) === undefined;
const fn: Rule = (v) => typeof v === 'function';
/** `@ValidateNested() @Type(...)` of a group: a plain object whose properties fit its table. */
const group =
  (table: Record<string, Rule>): Rule =>
  (v) =>
    isPlain(v) && fits(v, table);

/** A plain object (not null, not an array, not a class instance). */
function isPlain(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype;
}

/** Every own key known to `table` (whitelist), each value unset (`@IsOptional`) or fitting its rule. */
function fits(o: Record<string, unknown>, table: Record<string, Rule>): boolean {
  for (const key of Object.keys(o)) {
    if (!Object.prototype.hasOwnProperty.call(table, key)) return false;
    const v = o[key];
    if (v !== undefined && v !== null && !table[key](v)) return false;
  }
  return true;
}

/** The schema's groups, property by property (durable-execution-options.schema.ts). @internal */
export const OPTION_SHAPES = {
  RetryPolicySchema: {
    maxAttempts: int(1, 100),
    initialDelayMs: int(0),
    multiplier: num(1),
    maxDelayMs: int(0),
    jitter: num(0, 1),
  },
  DatabaseOptionsSchema: {
    url: nonEmpty,
    dataSourceName: nonEmpty,
    dataSource: isPlain,
    poolSize: int(1, 1000),
    migrationsRun: bool,
    schema: schemaName,
    directUrl: nonEmpty,
    preparedStatements: bool,
  },
  WorkerOptionsSchema: {
    enabled: bool,
    concurrency: int(1, 10_000),
    pollIntervalMs: int(10),
    leaseTtlMs: int(100),
    heartbeatMs: int(10),
    fencedTransport: bool,
    wireMarginMs: int(0),
    drainTimeoutMs: int(0),
    handoffLeaseMs: int(0),
    groupCommit: int(0, 1000),
    workerId: nonEmpty,
    presenceIntervalMs: int(100),
    lateCallGraceMs: int(0),
  },
  ReconcilerOptionsSchema: {
    enabled: bool,
    intervalMs: int(10),
    cron: str,
    batchSize: int(1, 10_000),
    backoffBaseMs: int(0),
    backoffMaxMs: int(0),
  },
  LimitOptionsSchema: {
    maxInputBytes: int(1),
    maxOutputBytes: int(1),
    maxShownValueBytes: int(1),
    maxStreamClients: int(1),
    maxPendingSignals: int(1, 1_000_000_000),
    maxPendingSignalsPerName: int(1, 1_000_000_000),
    minScheduleIntervalMs: int(0),
  },
} satisfies Record<string, Record<string, Rule>>;

const TOP: Record<string, Rule> = {
  database: group(OPTION_SHAPES.DatabaseOptionsSchema),
  worker: group(OPTION_SHAPES.WorkerOptionsSchema),
  reconciler: group(OPTION_SHAPES.ReconcilerOptionsSchema),
  limits: group(OPTION_SHAPES.LimitOptionsSchema),
  defaultMaxAttempts: int(1, 1000),
  defaultRetry: group(OPTION_SHAPES.RetryPolicySchema),
  defaultTimeoutMs: int(0),
  redact: fn,
  logRunData: bool,
  unservedKinds: oneOf('warn', 'refuse'),
  unkeyedStarts: oneOf('warn', 'refuse'),
};

/** The top-level table, for the spec. @internal */
export const TOP_OPTION_SHAPE: Readonly<Record<string, Rule>> = TOP;
