import type { ModelBudgetOptions, ResolvedModelBudget } from '../interfaces/budget.interface';
import type { FenceKeyOptions, ResolvedFenceKey } from './fence-key';
import type { RedactHook } from './redact';
import type { WorkerOptions } from './worker-options.interface';

export type { WorkerOptions } from './worker-options.interface';

/** Retry policy of a step or command: exponential backoff with jitter. */
export interface RetryPolicy {
  /**
   * Total attempts, first call included. Default 3. A step's failed attempts count across claims (each
   * is recorded before its retry: a worker that dies between two attempts leaves the next claim only
   * those left); a command's count within one claim.
   */
  maxAttempts?: number;
  /** Delay before the first retry. Default 200 ms. */
  initialDelayMs?: number;
  /** Factor applied to the delay after each retry. Default 2. */
  multiplier?: number;
  /** Upper bound of one delay. Default 10 s. */
  maxDelayMs?: number;
  /** Fraction of the delay randomised (0..1). Default 0.2. */
  jitter?: number;
}

/**
 * The members of a TypeORM `DataSource` the module uses, typed structurally so that a DataSource from the
 * app's own copy of typeorm (another version, or a second install) is accepted as it is. Any PostgreSQL
 * `DataSource` of typeorm 0.3.27+ fits.
 */
export interface DurableDataSource {
  readonly isInitialized: boolean;
  /** Its options; `type` must be `'postgres'`. Also used to build the short-lived migration DataSource. */
  readonly options: { readonly type: string };
  /** The driver; for PostgreSQL it holds the pg pool (`master`) the module queries. */
  readonly driver: unknown;
  initialize(): Promise<unknown>;
  destroy(): Promise<void>;
  query(query: string, parameters?: any[]): Promise<any>;
}

/** How the module reaches PostgreSQL: its own connection (`url`) or the app's TypeORM DataSource. */
export interface DatabaseOptions {
  /** Connection string; the module creates and owns (destroys) a DataSource for it. */
  url?: string;
  /**
   * Reuse the app's `@nestjs/typeorm` DataSource registered under this name (`'default'` for the unnamed
   * one), looked up with @nestjs/typeorm's own `getDataSourceToken` when it is installed.
   */
  dataSourceName?: string;
  /** Reuse this DataSource instance (e.g. injected in `forRootAsync`). Never destroyed by the module. */
  dataSource?: DurableDataSource;
  /** Pool size of the DataSource the module creates. Default 10. */
  poolSize?: number;
  /** Apply the module's migrations at start-up, under an advisory lock. Default true. */
  migrationsRun?: boolean;
  /**
   * The PostgreSQL schema the module's tables (and its `ai_migrations`) live in; created by the migration
   * when missing. A plain lowercase identifier. Default `'public'`: names stay unqualified, resolved by
   * the connection's `search_path` as they always were. Any other schema qualifies every statement
   * (nothing sets `search_path`, so an app's shared DataSource is untouched) and gets its own NOTIFY
   * channels, prepared-statement names and migration lock, so modules on two schemas of one database
   * never see each other's runs.
   */
  schema?: string;
  /**
   * A direct connection string to the primary (not through a pooler) for what needs a session of its own:
   * the LISTEN connections (wake-ups, run ends, streams; three at most per process) and the migration
   * advisory lock. Everything else (claims, step commits, finishes, admin) stays on the pool, which may
   * then go through PgBouncer in transaction mode. Default: those use the pool's own settings.
   */
  directUrl?: string;
  /**
   * Send the hot-path statements as named prepared statements (`dx_*`, parsed once per connection).
   * Set false behind a pooler in transaction mode that does not track them (PgBouncer before 1.21, or
   * `max_prepared_statements = 0`): every statement is then sent unnamed. Default true.
   */
  preparedStatements?: boolean;
}

/** Reconciler options: the sweep that recovers expired leases. */
export interface ReconcilerOptions {
  /** Run the reconciler in this process. Default true. */
  enabled?: boolean;
  /** Sweep period. Default 5000 ms. */
  intervalMs?: number;
  /**
   * Sweep on a cron expression instead (`CronExpression.EVERY_5_SECONDS`, `'*\/10 * * * * *'`): the job
   * `durable-execution:reconciler` in the app's SchedulerRegistry. Not with `intervalMs`.
   */
  cron?: string;
  /** Runs handled per sweep statement. Default 100. */
  batchSize?: number;
  /** Backoff base for a run whose lease expired. Default 1000 ms. */
  backoffBaseMs?: number;
  /** Backoff cap. Default 5 min. */
  backoffMaxMs?: number;
}

/** Size caps of stored JSON, in bytes, and the limits on what a caller may pile up. */
export interface LimitOptions {
  /** Run input cap. Default 1 MiB. */
  maxInputBytes?: number;
  /** Step output cap. Default 2 MiB. */
  maxOutputBytes?: number;
  /**
   * The largest checkpoint output or meta (its JSON, after `redact`) a run detail or checkpoints page of
   * the admin API (and the CLI's `show`) includes. A larger one is shown as a marker,
   * `{ $truncated: true, bytes, fetch }`, its `fetch` the route that answers that checkpoint whole.
   * Default 64 KiB.
   */
  maxShownValueBytes?: number;
  /**
   * The most SSE clients (`runEventStream`, the admin API's run stream) this process serves at once;
   * one more is refused before any byte with TooManyStreamClientsError (503 with
   * `DurableExceptionFilter`). The clients of one run share one reader of its stream, but each holds a
   * connection and up to a window of entries. Default 1000.
   */
  maxStreamClients?: number;
  /**
   * Signals a run may hold that no wait has taken (`RunRepository.signal`, admin API, CLI): one more is
   * TooManyPendingSignalsError (429), nothing stored. Default 3000.
   */
  maxPendingSignals?: number;
  /** The same, for the signals of one name. Default 1000 (at most `maxPendingSignals`). */
  maxPendingSignalsPerName?: number;
  /** Shortest time between ticks of a schedule made at run time (`@DurableCron` may go lower); 0: none. Default 60 s. */
  minScheduleIntervalMs?: number;
}

/** Options of `DurableExecutionModule.forRoot()` / `forRootAsync()`. */
export interface DurableExecutionModuleOptions {
  database: DatabaseOptions;
  worker?: WorkerOptions;
  reconciler?: ReconcilerOptions;
  limits?: LimitOptions;
  /** Default `max_attempts` of a new run (claims without progress before dead-letter). Default 5. */
  defaultMaxAttempts?: number;
  /** Default retry policy of steps. */
  defaultRetry?: RetryPolicy;
  /**
   * The timeout of each attempt of a `@DurableStep`, `@IdempotentCommand` or `@DurableTransaction`
   * that sets no `timeoutMs` of its own: a call that never answers cannot hold its run (docs/API.md,
   * "Timeouts"). Default 600000 (10 minutes); 0: none (a call without its own `timeoutMs` then waits
   * for ever, and the module warns at boot, naming them).
   */
  defaultTimeoutMs?: number;
  /**
   * One hook for every place run data is shown: `redact(key, value)` returns what may be shown in
   * place of `value`. Event payloads pass it (key: the event type) before they are stored and again
   * when shown; run input, output, state, error, parked and cancel reasons, checkpoint outputs, signal
   * payloads and command args, results and errors (key: a `RedactSurface`) are stored intact, since the
   * engine replays from them, and pass it each time the admin API, the inspector page or a log line
   * (`logRunData`) shows them. `RunRepository` and `CommandGateway` reads are the app's own API and
   * return data unredacted. Return `value` unchanged for keys you do not handle; the hook must be
   * idempotent. A hook that throws while a value is shown yields `'[redaction failed]'`.
   * @example
   * ```ts
   * redact: (key, value) => (key === 'run.input' ? { ...value, email: '[redacted]' } : value)
   * ```
   */
  redact?: RedactHook;
  /**
   * Put error messages of runs in the module's log lines (context `DurableExecution`: run failed,
   * dead-lettered, …), through `redact` as `run.error`. Default false: those lines carry the run id and
   * kind only, never run data (an error message can quote input or output).
   */
  logRunData?: boolean;
  /**
   * What `start()` does with a kind no live worker serves (no worker's presence row lists it), in a
   * process that does not run that kind itself (a producer-only API pod): `'warn'` logs one warning per
   * kind and starts the run (it waits for a worker), `'refuse'` throws NoWorkerForKindError and writes
   * nothing. Default `'warn'`.
   */
  unservedKinds?: 'warn' | 'refuse';
  /**
   * What `start()` does with a kind started by name with no `concurrencyKey`, in a process that does not
   * register it, when a worker declares a per-key limit for that kind (`perKeyConcurrency` or
   * `rateLimit.perKey`): such a run has no key and escapes the limit. `'warn'` logs one warning per kind
   * and starts it; `'refuse'` throws MissingConcurrencyKeyError and writes nothing. Passing the class
   * (`start(TheWorkflow, input)`) applies its key function and needs neither. Default `'warn'`.
   */
  unkeyedStarts?: 'warn' | 'refuse';
  /**
   * Budgets of model calls for the whole fleet, by name: `{ openai: { requests: 500, tokens: 200_000 } }`
   * (per minute by default). A step draws on one with `@DurableStep({ kind: 'model', budget: 'openai' })`;
   * a call over budget parks its run until the window allows it. Every process that runs such steps
   * declares the same budgets (the last declared wins). See docs/FLOW-CONTROL.md.
   */
  budgets?: Record<string, ModelBudgetOptions>;
  /**
   * Sign every command's fencing token (`ctx.fence`, and a lookup's `context.fence`) with this key:
   * `fenceHeaders(ctx.fence)` then sends a `v2` header whose MAC covers run, timeline, epoch, command key
   * and expiry (the claim's lease end), which a target's `FenceVerifier` with the same key checks.
   * Default: unsigned tokens (`v1`), which any caller can forge. See docs/OPERATIONS.md, "Fencing tokens".
   * @example `fence: { keyId: 'k1', secret: process.env.DURABLE_FENCE_SECRET! }`
   */
  fence?: FenceKeyOptions;
}

/** Options after validation with every default filled in. Services inject these. */
export interface ResolvedDurableOptions {
  database: Required<Pick<DatabaseOptions, 'poolSize' | 'migrationsRun' | 'schema' | 'preparedStatements'>> &
    Pick<DatabaseOptions, 'url' | 'dataSourceName' | 'dataSource' | 'directUrl'>;
  worker: Required<WorkerOptions>;
  reconciler: Required<Omit<ReconcilerOptions, 'cron'>> & Pick<ReconcilerOptions, 'cron'>;
  limits: Required<LimitOptions>;
  defaultMaxAttempts: number;
  defaultRetry: Required<RetryPolicy>;
  defaultTimeoutMs: number;
  redact?: DurableExecutionModuleOptions['redact'];
  logRunData: boolean;
  unservedKinds: 'warn' | 'refuse';
  unkeyedStarts: 'warn' | 'refuse';
  budgets: Record<string, ResolvedModelBudget>;
  /** The key commands' fencing tokens are signed with; undefined: unsigned. */
  fence?: ResolvedFenceKey;
}
