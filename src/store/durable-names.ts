import { createHash } from 'node:crypto';
import {
  DONE_CHANNEL,
  MIGRATION_LOCK_KEY,
  STREAM_CHANNEL,
  WAKE_CHANNEL,
} from '../durable-execution.constants';
import { InvalidArgumentError } from '../errors/invalid-argument.error';
import { DEFAULT_SCHEMA, schemaNameProblem } from '../options/schema-name';

/**
 * Everything the module names in PostgreSQL, for one schema: its tables as statements write them, its
 * NOTIFY channels, its prepared statements and its migration lock. The default schema (`public`, or
 * none given) keeps every name exactly as it was before schemas existed: tables unqualified (the
 * connection's `search_path`), the same channels, statement names and lock, so existing databases and
 * the statements the benchmarks time do not change. Any other schema qualifies every table
 * (`"durable".ai_runs`) and scopes every other name to itself: two schemas on one database (or one
 * pool) never share a channel, a prepared statement or a lock.
 * @internal
 */
export interface DurableNames {
  /** The schema, or undefined for the default (names unqualified). */
  readonly schema: string | undefined;
  readonly runs: string;
  readonly checkpoints: string;
  readonly commands: string;
  readonly events: string;
  /** The events' identity sequence: ids of events written in checkpoint rows come from it too. */
  readonly eventIds: string;
  readonly signals: string;
  /** Checkpoints a rewind in place took out of a run's record (`RunRepository.rewind`), kept for its history. */
  readonly rewound: string;
  /** Sign-in sessions of the admin page (`login: true`). */
  readonly adminSessions: string;
  /** The live workers and the kinds each serves (`ai_workers`). */
  readonly workers: string;
  /** Concurrency limits per kind, as the workers that run it declare them (`ai_limits`). */
  readonly limits: string;
  /** Concurrency slots: one row per slot of a kind or key, held by (run, epoch) (`ai_slots`). */
  readonly slots: string;
  /** Durable cron schedules (`ai_schedules`). */
  readonly schedules: string;
  /** Rate-limit tokens: `limit` per kind or key, each free again a period after it was taken. */
  readonly rateTokens: string;
  /** Model budgets as the processes that use them declare them (`ai_budgets`). */
  readonly budgets: string;
  /** The calls admitted on a budget in its window, with their tokens (`ai_budget_use`). */
  readonly budgetUse: string;
  /** Each run's progress stream, the entries of `ctx.emit` (`ai_run_stream`). */
  readonly stream: string;
  /** One row per tag of a run, newest first per tag (`ai_run_tags`): the tag search's index. */
  readonly runTags: string;
  /** The module's own migrations table (`ai_migrations`), qualified as the tables are. */
  readonly migrations: string;
  /** NOTIFY channel that wakes idle workers of this schema. */
  readonly wakeChannel: string;
  /** NOTIFY channel on which awaited runs of this schema are announced when they end. */
  readonly doneChannel: string;
  /** NOTIFY channel on which a run's new stream entries are announced (payload: its id). */
  readonly streamChannel: string;
  /** Session advisory lock key held while this schema's migrations run. */
  readonly lockKey: string;
  /** `prefix` (a trailing `.` when qualified) of an object in this schema, e.g. an index: `"durable".` */
  readonly prefix: string;
  /** The prepared-statement name for `base` (`dx_claim`) in this schema. */
  statement(base: string): string;
  /** A table name as messages show it: `ai_runs`, or `durable.ai_runs`. */
  label(table: string): string;
}

/** A statement's text for the schema it runs in. @internal */
export type SqlText = (names: DurableNames) => string;

/** PostgreSQL truncates names (channels, prepared statements) past 63 bytes. */
const MAX_NAME_BYTES = 63;

/** `base` + `sep` + `schema`, or with a hash of the schema in its place when that would be too long. */
function scoped(base: string, sep: string, schema: string): string {
  const name = `${base}${sep}${schema}`;
  if (Buffer.byteLength(name) <= MAX_NAME_BYTES) return name;
  const hash = createHash('sha256').update(schema).digest('hex');
  return `${base}${sep}${hash.slice(0, MAX_NAME_BYTES - base.length - sep.length)}`;
}

/** A 64-bit advisory lock key of its own for the schema's migrations (the default keeps its key). */
function lockKeyOf(schema: string): string {
  const digest = createHash('sha256').update(`nestjs-durable-execution:migrations:${schema}`).digest();
  return digest.readBigInt64BE(0).toString();
}

/**
 * The names for `schema`; the default when none. A name that is not a plain identifier is refused
 * (`InvalidArgumentError` naming `schema`): it is written into statements. @internal
 */
export function durableNames(schema?: string): DurableNames {
  const own = schema === undefined || schema === DEFAULT_SCHEMA ? undefined : schema;
  const problem = own === undefined ? undefined : schemaNameProblem(own);
  if (problem) throw new InvalidArgumentError('schema', problem);
  const prefix = own === undefined ? '' : `"${own}".`;
  const statements = new Map<string, string>();
  return {
    schema: own,
    runs: `${prefix}ai_runs`,
    checkpoints: `${prefix}ai_checkpoints`,
    commands: `${prefix}ai_commands`,
    events: `${prefix}ai_events`,
    eventIds: `${prefix}ai_events_id_seq`,
    signals: `${prefix}ai_signals`,
    rewound: `${prefix}ai_rewound_checkpoints`,
    adminSessions: `${prefix}ai_admin_sessions`,
    workers: `${prefix}ai_workers`,
    limits: `${prefix}ai_limits`,
    slots: `${prefix}ai_slots`,
    schedules: `${prefix}ai_schedules`,
    rateTokens: `${prefix}ai_rate_tokens`,
    budgets: `${prefix}ai_budgets`,
    budgetUse: `${prefix}ai_budget_use`,
    stream: `${prefix}ai_run_stream`,
    runTags: `${prefix}ai_run_tags`,
    migrations: `${prefix}ai_migrations`,
    wakeChannel: own === undefined ? WAKE_CHANNEL : scoped(WAKE_CHANNEL, '_', own),
    doneChannel: own === undefined ? DONE_CHANNEL : scoped(DONE_CHANNEL, '_', own),
    streamChannel: own === undefined ? STREAM_CHANNEL : scoped(STREAM_CHANNEL, '_', own),
    lockKey: own === undefined ? String(MIGRATION_LOCK_KEY) : lockKeyOf(own),
    prefix,
    // `@` never occurs in a base name or a schema name: two bases can never meet in one scoped name.
    statement(base) {
      if (own === undefined) return base;
      let name = statements.get(base);
      if (name === undefined) statements.set(base, (name = scoped(base, '@', own)));
      return name;
    },
    label: (table) => (own === undefined ? table : `${own}.${table}`),
  };
}

/** The default schema's names: every statement exactly as before the `schema` option. @internal */
export const DEFAULT_NAMES: DurableNames = durableNames();

/**
 * Creates `schema` unless it exists. Looked up first: `create schema if not exists` asks for the CREATE
 * privilege on the database even when the schema is there, which a migration role given a schema
 * made by its DBA may not have. @internal
 */
export async function ensureSchema(
  q: { query(sql: string, parameters?: unknown[]): Promise<unknown> }, // a TypeORM QueryRunner or DataSource
  schema: string,
): Promise<void> {
  durableNames(schema); // refuses a name that is not a plain identifier: it is written into the statement
  const rows = (await q.query('select 1 from pg_namespace where nspname = $1', [schema])) as unknown[];
  if (!rows.length) await q.query(`create schema if not exists "${schema}"`);
}
