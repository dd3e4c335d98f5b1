import { DurableUsageError } from '../errors/durable-usage.error';
import { InvalidArgumentError } from '../errors/invalid-argument.error';
import { StaleFenceError } from '../errors/stale-fence.error';
import { FenceAuthenticator } from './fence-authenticator';
import type { FenceSecret } from './fence-signature';
import type { FenceToken } from './fence-token';

/**
 * Runs one SQL statement with positional parameters (`$1`, `$2`, …) and resolves to its rows: TypeORM's
 * `manager.query.bind(manager)` inside a transaction, or `(sql, params) => client.query(sql, params).then((r) => r.rows)`
 * for a `pg` client that has begun one.
 */
export type FenceQuery = (sql: string, params: unknown[]) => Promise<unknown[]>;

/** Options of `FenceVerifier`. */
export interface FenceVerifierOptions {
  /**
   * The table that keeps the greatest token seen per run: a plain lowercase identifier, optionally
   * schema-qualified (`durable.fences`). Default `durable_fences`.
   */
  table?: string;
  /**
   * The keys a token must be signed with, by key id: `{ k2: process.env.FENCE_SECRET_K2 }`, each the
   * `secret` of the workers' module option `fence: { keyId, secret }` (at least 32 bytes). List the old
   * and the new id during a rotation. With keys, `check` refuses an unsigned, forged, expired or other
   * command's token (`UnauthenticatedFenceError`, 401) before it touches the table. Without keys (not
   * recommended) any caller that reaches the target can send any token: a warning is logged once.
   */
  keys?: Record<string, FenceSecret>;
  /**
   * How far the clocks of a worker (which stamps a token's expiry) and of the target (which compares
   * it) may differ: a token passes until its expiry plus this. Default 10 s.
   */
  clockSkewMs?: number;
  /**
   * The longest a token may live: the workers' `worker.leaseTtlMs` (a token expires when its claim's
   * lease does; default 30 s, as that option). A token expiring further ahead is refused, which bounds
   * how long after a row's last use a token can still pass (`sweep`).
   */
  maxTokenLifetimeMs?: number;
}

/** Options of `FenceVerifier.check` and `authenticate`. */
export interface FenceCheckOptions {
  /**
   * The idempotency key of the command the request serves (the key it carries in a header or its
   * body, the key a lookup asks about): a signed token is valid with its own command only. Required by
   * `check` when the verifier has keys.
   */
  commandKey?: string;
}

/** Options of `FenceVerifier.sweep`. */
export interface FenceSweepOptions {
  /**
   * Delete rows whose last use (`seen_at`) is older than this. Default one hour; at least
   * `maxTokenLifetimeMs + 2 × clockSkewMs`, after which no token older than the row's can pass.
   */
  olderThanMs?: number;
  /** The most rows one call deletes. Default 10,000. */
  limit?: number;
}

/** A plain lowercase identifier, as the module's schema names: the same quoted or not. */
const IDENTIFIER = '[a-z_][a-z0-9_]{0,62}';
const TABLE_NAME = new RegExp(`^(${IDENTIFIER}\\.)?${IDENTIFIER}$`);

/**
 * The one statement `check` runs ($1 run id, $2 timeline, $3 epoch): inserts the run's pair, or raises
 * it when the stored one is not greater; returns a row unless the stored pair is greater.
 */
function checkSql(table: string): string {
  return (
    `insert into ${table} as f (run_id, timeline, epoch) values ($1, $2, $3) ` +
    `on conflict (run_id) do update set timeline = excluded.timeline, epoch = excluded.epoch, seen_at = now() ` +
    `where (f.timeline, f.epoch) <= (excluded.timeline, excluded.epoch) returning 1`
  );
}

/**
 * Deletes up to $2 rows unused for $1 ms (`seen_at`, the target database's clock), and counts them. The
 * outer test is checked again on a row a concurrent `check` refreshed meanwhile: that one stays.
 */
function sweepSql(table: string): string {
  const old = `seen_at < now() - $1::double precision * interval '1 millisecond'`;
  return (
    `with gone as (delete from ${table} f where f.${old} and f.run_id in ` +
    `(select run_id from ${table} where ${old} limit $2) returning 1) select count(*)::int as n from gone`
  );
}

/**
 * Checks fencing tokens (`durable-fence` header, `parseFence`) at a target you own, in its own
 * PostgreSQL: keeps the greatest `(timeline, epoch)` pair seen per run in a table and refuses a request
 * whose pair is smaller (`StaleFenceError`): it comes from a worker frozen past its lease after another
 * worker took the run over. An equal pair passes (the same claim sending again). It imports no driver:
 * `check` takes the query function of the transaction it must run in.
 *
 * With `keys` (the secret the workers sign with, module option `fence`), a token must be signed: one
 * that is not, whose MAC does not match, that expired (its claim's lease ended) or that was signed for
 * another command than `commandKey` is refused (`UnauthenticatedFenceError`, 401) before the table is
 * touched, so a caller without the secret can neither raise a run's fence (and lock its worker out)
 * nor pass as a run. A token proves that a worker holding the secret signed it for that run, claim and
 * command while that claim's lease held; it does not identify the caller nor authorise the request:
 * authenticate callers first, as for any endpoint (see docs/OPERATIONS.md, "Fencing tokens").
 *
 * Two rules make it close the window in which a zombie's request can still arrive:
 * - `check` runs **inside the same transaction as the target's write**, before it. The upsert locks the
 *   run's row until that transaction ends, so a zombie's request and the new owner's are serialised: the
 *   later one sees the earlier one's pair, and a refused request writes nothing (throwing rolls back).
 * - The target's **lookup endpoint** (what `CommandLookup.lookupCommand` asks, with `context.fence`)
 *   calls `check` too. A newer claim looks its in-doubt command up before it sends again; that lookup
 *   raises the fence, so a zombie's request arriving after it is refused. Without it, a zombie arriving
 *   after the new owner's lookup ("not found") but before its send would pass, and both would apply.
 * @example
 * ```ts
 * const verifier = new FenceVerifier({ keys: { k1: process.env.DURABLE_FENCE_SECRET! } });
 * await dataSource.query(verifier.createTableSql()); // once, at boot or in a migration
 * await dataSource.transaction(async (manager) => {
 *   // token: parseFence(req.headers['durable-fence']); the key: the command's idempotency key it carries
 *   await verifier.check(manager.query.bind(manager), token, { commandKey: body.idempotencyKey });
 *   await manager.query('insert into transfers ...', [...]);
 * });
 * ```
 */
export class FenceVerifier {
  /** The table's name, as written into the statements. */
  readonly table: string;
  /** How far a worker's and the target's clocks may differ (ms). */
  readonly clockSkewMs: number;
  /** The longest a token may live (ms): the workers' lease. */
  readonly maxTokenLifetimeMs: number;
  private readonly auth: FenceAuthenticator;

  constructor(options: FenceVerifierOptions = {}) {
    const table = options.table ?? 'durable_fences';
    if (typeof table !== 'string' || !TABLE_NAME.test(table) || /(^|\.)pg_/.test(table))
      throw new InvalidArgumentError(
        'FenceVerifier table',
        `must be a plain lowercase PostgreSQL identifier (letters, digits and _, at most 63, not starting with pg_), optionally schema-qualified, got ${JSON.stringify(table)}`,
      );
    this.table = table;
    this.auth = new FenceAuthenticator(options);
    this.clockSkewMs = this.auth.clockSkewMs;
    this.maxTokenLifetimeMs = this.auth.maxTokenLifetimeMs;
  }

  /** Whether tokens must be signed: keys were given. */
  get signed(): boolean {
    return this.auth.signed;
  }

  /** The statement that creates the table when it is missing (run it at boot or in a migration). */
  createTableSql(): string {
    return (
      `create table if not exists ${this.table} (run_id text primary key, timeline integer not null, ` +
      `epoch bigint not null, seen_at timestamptz not null default now())`
    );
  }

  /**
   * Checks that `token` is signed by a listed key, unaltered, unexpired and (given `commandKey`) for
   * that command, without touching the table (what `DurableFenceGuard` does); throws
   * `UnauthenticatedFenceError` when not. Without keys, only its format. Returns the token.
   */
  authenticate(token: FenceToken, options: FenceCheckOptions = {}): FenceToken {
    return this.auth.authenticate(token, options);
  }

  /**
   * Authenticates `token` (with keys: `commandKey` required), then records it as the greatest seen for
   * its run, or throws `StaleFenceError` when a greater one was seen (nothing changed). One statement;
   * run it inside the transaction of the request's write, on the write endpoint and on the lookup
   * endpoint alike (see the class).
   */
  async check(query: FenceQuery, token: FenceToken, options: FenceCheckOptions = {}): Promise<void> {
    if (this.auth.signed && options?.commandKey === undefined)
      throw new DurableUsageError(
        'FenceVerifier.check: with keys, pass the idempotency key of the command the request serves, ' +
          '{ commandKey }: a signed token is valid with its own command only',
      );
    const { runId, timeline, epoch } = this.auth.authenticate(token, options ?? {});
    const rows = await query(checkSql(this.table), [runId, timeline, epoch]);
    if (!Array.isArray(rows)) throw notRows('check');
    if (rows.length === 0) throw new StaleFenceError(runId, timeline, epoch);
  }

  /**
   * Deletes the rows of runs whose last use is older than `olderThanMs` (default one hour), at most
   * `limit` (10,000) per call, and returns how many went: call it from a periodic job. A row may go
   * only once no token it refuses can pass any more: a signed token lives `maxTokenLifetimeMs` and
   * passes `clockSkewMs` beyond that, so `olderThanMs` must be at least the lifetime plus twice the
   * skew (`maxTokenLifetimeMs + 2 × clockSkewMs`). Without keys a token never expires and a deleted
   * row would let an older claim's token pass again while the run may still be claimed: refused
   * (DurableUsageError).
   */
  async sweep(query: FenceQuery, options: FenceSweepOptions = {}): Promise<number> {
    if (!this.auth.signed)
      throw new DurableUsageError(
        "FenceVerifier.sweep: without keys, fencing tokens never expire, so deleting a run's row would let an " +
          "older claim's token pass again: give the verifier keys (and the workers the module option fence), " +
          'or delete only rows of runs that ended (RunRepository.get: a final status) yourself',
      );
    const min = this.maxTokenLifetimeMs + 2 * this.clockSkewMs;
    const olderThanMs = options?.olderThanMs ?? Math.max(3_600_000, min);
    if (!Number.isSafeInteger(olderThanMs) || olderThanMs < min)
      throw new InvalidArgumentError(
        'FenceVerifier.sweep olderThanMs',
        `must be whole milliseconds of at least maxTokenLifetimeMs + 2 × clockSkewMs (${min}): a younger row ` +
          `may still be all that refuses an older claim's token; got ${String(olderThanMs)}`,
      );
    const limit = options?.limit ?? 10_000;
    if (!Number.isSafeInteger(limit) || limit < 1)
      throw new InvalidArgumentError(
        'FenceVerifier.sweep limit',
        `must be a positive integer, got ${String(limit)}`,
      );
    const rows = await query(sweepSql(this.table), [olderThanMs, limit]);
    if (!Array.isArray(rows)) throw notRows('sweep');
    return Number((rows[0] as { n?: unknown } | undefined)?.n ?? 0);
  }
}

function notRows(method: string): DurableUsageError {
  return new DurableUsageError(
    `FenceVerifier.${method}: the query function must resolve to the rows (an array): for a pg client ` +
      'pass (sql, params) => client.query(sql, params).then((r) => r.rows)',
  );
}
