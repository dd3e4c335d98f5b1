import { DurableUsageError } from '../errors/durable-usage.error';
import { InvalidArgumentError } from '../errors/invalid-argument.error';
import { StaleFenceError } from '../errors/stale-fence.error';
import { FenceToken, requireFenceToken } from './fence-token';

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
 * Checks fencing tokens (`durable-fence` header, `parseFence`) at a target you own, in its own
 * PostgreSQL: keeps the greatest `(timeline, epoch)` pair seen per run in a table and refuses a request
 * whose pair is smaller (`StaleFenceError`): it comes from a worker frozen past its lease after another
 * worker took the run over. An equal pair passes (the same claim sending again). It imports no driver:
 * `check` takes the query function of the transaction it must run in.
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
 * const verifier = new FenceVerifier();
 * await dataSource.query(verifier.createTableSql()); // once, at boot or in a migration
 * await dataSource.transaction(async (manager) => {
 *   await verifier.check(manager.query.bind(manager), token); // token: parseFence(req.headers['durable-fence'])
 *   await manager.query('insert into transfers ...', [...]);
 * });
 * ```
 */
export class FenceVerifier {
  /** The table's name, as written into the statements. */
  readonly table: string;

  constructor(options: FenceVerifierOptions = {}) {
    const table = options.table ?? 'durable_fences';
    if (typeof table !== 'string' || !TABLE_NAME.test(table) || /(^|\.)pg_/.test(table))
      throw new InvalidArgumentError(
        'FenceVerifier table',
        `must be a plain lowercase PostgreSQL identifier (letters, digits and _, at most 63, not starting with pg_), optionally schema-qualified, got ${JSON.stringify(table)}`,
      );
    this.table = table;
  }

  /** The statement that creates the table when it is missing (run it at boot or in a migration). */
  createTableSql(): string {
    return (
      `create table if not exists ${this.table} (run_id text primary key, timeline integer not null, ` +
      `epoch bigint not null, seen_at timestamptz not null default now())`
    );
  }

  /**
   * Records `token` as the greatest seen for its run, or throws `StaleFenceError` when a greater one was
   * seen (nothing changed). One statement; run it inside the transaction of the request's write, on
   * the write endpoint and on the lookup endpoint alike (see the class).
   */
  async check(query: FenceQuery, token: FenceToken): Promise<void> {
    const { runId, timeline, epoch } = requireFenceToken(token, 'token');
    const rows = await query(checkSql(this.table), [runId, timeline, epoch]);
    if (!Array.isArray(rows))
      throw new DurableUsageError(
        'FenceVerifier.check: the query function must resolve to the rows (an array): for a pg client ' +
          'pass (sql, params) => client.query(sql, params).then((r) => r.rows)',
      );
    if (rows.length === 0) throw new StaleFenceError(runId, timeline, epoch);
  }
}
