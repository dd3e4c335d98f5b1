import { Inject, Injectable, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { randomInt } from 'node:crypto';
import type { Pool, PoolClient } from 'pg';
import type { DataSource, QueryRunner } from 'typeorm';
import { DURABLE_EXECUTION_OPTIONS } from '../../durable-execution.constants';
import { DurableUsageError } from '../../errors/durable-usage.error';
import type { RunCursor } from '../../interfaces/run.interface';
import type { TransactionMetadata } from '../../interfaces/transaction.interface';
import type { ResolvedDurableOptions } from '../../options/durable-execution-options.interface';
import { DurableDatabase } from '../durable-database';
import type { CheckpointWrite, Fence } from '../run-state/fence';
import { writeStepIn } from '../run-state/step-write';
import { ensureOtherTables } from './other-database';
import {
  setPlainTransactionRunner,
  inAbortedTransaction,
  Slots,
  swallowedStatementError,
  TransactionSession,
  transactionStorage,
} from './transaction-session';

/** Where a durable transaction runs: a DataSource, and whether it is the module's own database. @internal */
export interface TransactionTarget {
  readonly dataSource: DataSource;
  /** The module's tables are reachable through it: the checkpoint commits in the same transaction. */
  readonly sameDatabase: boolean;
  /** For errors: `the module's DataSource`, `DataSource 'orders'`. */
  readonly label: string;
}

const pgPoolOf = (ds: DataSource): Pool => (ds.driver as unknown as { master: Pool }).master;

/**
 * The database side of `@DurableTransaction`: resolves the DataSource a transaction runs on (and whether
 * it is the module's database), opens its transactions (one connection each, at most half the pool's
 * connections at once so that the heartbeat and the step writes always find one) with the lock and idle
 * timeouts that keep a frozen worker's locks from outliving its lease, and commits a step's checkpoint
 * inside one.
 * @internal
 */
@Injectable()
export class DurableTransactionStore implements OnModuleInit, OnApplicationShutdown {
  private readonly targets = new Map<string, Promise<TransactionTarget>>();
  private readonly slots = new WeakMap<DataSource, Slots>();

  constructor(
    readonly db: DurableDatabase,
    @Inject(DURABLE_EXECUTION_OPTIONS) readonly options: ResolvedDurableOptions,
  ) {}

  onModuleInit(): void {
    setPlainTransactionRunner((meta, call) => this.plain(meta, call));
  }

  onApplicationShutdown(): void {
    setPlainTransactionRunner(undefined);
  }

  /** The DataSource `name` names (the module's own when undefined), resolved and probed once. */
  target(name: string | undefined): Promise<TransactionTarget> {
    const key = name ?? '';
    let t = this.targets.get(key);
    if (!t) {
      t = this.resolve(name);
      t.catch(() => this.targets.delete(key)); // a failure is not cached: the next call tries again
      this.targets.set(key, t);
    }
    return t;
  }

  private async resolve(name: string | undefined): Promise<TransactionTarget> {
    const own = this.db.dataSource as unknown as DataSource;
    if (name === undefined) return { dataSource: own, sameDatabase: true, label: "the module's DataSource" };
    const ds = this.db.appDataSource(name) as unknown as DataSource;
    const label = `DataSource '${name}'`;
    if (ds.options.type !== 'postgres')
      throw new DurableUsageError(
        `@DurableTransaction({ dataSource: '${name}' }): ${label} is a '${String(ds.options.type)}' one; durable transactions need PostgreSQL`,
      );
    if (ds === own) return { dataSource: ds, sameDatabase: true, label };
    if (!ds.isInitialized) await ds.initialize();
    const sameDatabase = await this.sameDatabase(ds);
    if (!sameDatabase) await ensureOtherTables(ds, label);
    return { dataSource: ds, sameDatabase, label };
  }

  /**
   * Whether `ds` reaches the module's database, decided by the server, never by comparing URLs: a
   * transaction of the module's pool holds a random advisory lock (advisory locks are per database)
   * that `ds` then fails to take, and the module's runs table is the same object through both.
   */
  private async sameDatabase(ds: DataSource): Promise<boolean> {
    const key = randomInt(1, 2 ** 47);
    const runs = this.db.names.runs;
    return this.db.transaction(async (client) => {
      const [mine] = (
        await client.query<{ runs: string | null }>(
          `select pg_advisory_xact_lock($1::bigint), to_regclass($2)::oid::text as runs`,
          [key, runs],
        )
      ).rows;
      const [theirs] = (await ds.query(
        `select pg_try_advisory_xact_lock($1::bigint) as got, to_regclass($2)::oid::text as runs`,
        [key, runs],
      )) as Array<{ got: boolean; runs: string | null }>;
      return !theirs.got && theirs.runs !== null && theirs.runs === mine.runs;
    });
  }

  /**
   * A durable transaction's timeouts. Idle in the transaction for half a lease (at least a second): the
   * server ends the session, so a worker frozen mid-body releases its row locks within half a lease of
   * its last statement. Waiting for a lock: a whole lease, so a new owner outwaits such a zombie.
   */
  private get timeouts(): { idle: number; lock: number } {
    const ttl = this.options.worker.leaseTtlMs;
    return { idle: Math.max(1000, Math.floor(ttl / 2)), lock: Math.max(1000, ttl) };
  }

  /**
   * Opens a transaction on `target` (waiting for a slot when as many as half its pool's connections
   * hold one): one round trip for the BEGIN with its isolation and its timeouts.
   */
  async open(target: TransactionTarget, meta: TransactionMetadata): Promise<TransactionSession> {
    const ds = target.dataSource;
    let slots = this.slots.get(ds);
    if (!slots) {
      const max = pgPoolOf(ds)?.options?.max ?? 10;
      this.slots.set(ds, (slots = new Slots(Math.max(1, Math.floor(max / 2)))));
    }
    await slots.take();
    let qr: QueryRunner | undefined;
    try {
      qr = ds.createQueryRunner();
      const client = (await qr.connect()) as PoolClient;
      const { idle, lock } = this.timeouts;
      await client.query(
        `start transaction isolation level ${meta.isolation}; set local lock_timeout = ${lock}; set local idle_in_transaction_session_timeout = ${idle}`,
      );
      // TypeORM's own state for a transaction it began: its manager then neither begins nor commits one.
      const state = qr as unknown as { isTransactionActive: boolean; transactionDepth?: number };
      state.isTransactionActive = true;
      if (typeof state.transactionDepth === 'number') state.transactionDepth = 1;
      const session = new TransactionSession(qr, client, `transaction ${meta.name}`);
      const give = slots;
      session.onClose = () => give.give();
      return session;
    } catch (err) {
      await qr?.release().catch(() => undefined);
      slots.give();
      throw err;
    }
  }

  /**
   * The same-database commit: the step's fenced write as the transaction's last statement, then COMMIT.
   * LeaseLostError (the transaction rolled back) when a newer claim owns the run.
   */
  async commitStep(
    session: TransactionSession,
    fence: Fence,
    cursor: RunCursor,
    checkpoints: CheckpointWrite[],
    payload: Record<string, unknown>,
    index: number,
  ): Promise<{ cancelRequested: boolean }> {
    const out = await writeStepIn(this, session.client, fence, cursor, checkpoints, payload, index).catch(
      (err) => {
        throw inAbortedTransaction(err) ? swallowedStatementError(session.label) : err;
      },
    );
    await this.commit(session);
    return out;
  }

  /** COMMIT; the connection goes back to the pool. */
  async commit(session: TransactionSession): Promise<void> {
    const res = await session.client.query('commit');
    markEnded(session.queryRunner);
    this.close(session);
    // A transaction an error had aborted (the body caught it and went on) answers COMMIT with ROLLBACK.
    if (res.command?.toUpperCase() === 'ROLLBACK') throw swallowedStatementError(session.label);
  }

  /** ROLLBACK where the connection can still say it; the connection is closed where it cannot. */
  async rollback(session: TransactionSession): Promise<void> {
    if (!session.open) return;
    try {
      await session.client.query('rollback');
      markEnded(session.queryRunner);
      this.close(session);
    } catch (err) {
      this.close(session, err as Error);
    }
  }

  /**
   * A transaction past its deadline: its running statement is cancelled (from another connection) and
   * its connection closed (the server rolls the transaction back), whatever the body still awaits.
   */
  async abandon(session: TransactionSession, reason: Error): Promise<void> {
    if (!session.open) return;
    const pid = (session.client as unknown as { processID?: number }).processID;
    session.open = false; // the body reaches it no more
    // Cancelled while the connection still holds its backend: once it is closed the server may give
    // that process id to another session, whose statement the cancel would stop instead.
    if (pid) await this.db.query('select pg_cancel_backend($1)', [pid]).catch(() => undefined);
    this.release(session, reason);
  }

  /** Ends the session: its connection back to the pool, or destroyed with `error`; its slot freed. */
  private close(session: TransactionSession, error?: Error): void {
    if (!session.open) return;
    session.open = false;
    this.release(session, error);
  }

  private release(session: TransactionSession, error?: Error): void {
    const qr = session.queryRunner as unknown as { releasePostgresConnection?(err?: Error): Promise<void> };
    if (error && typeof qr.releasePostgresConnection === 'function')
      void qr.releasePostgresConnection(error).catch(() => undefined);
    else void session.queryRunner.release().catch(() => undefined);
    session.onClose?.();
  }

  /**
   * A `@DurableTransaction` method called outside a run or inside a step's body: a plain transaction
   * on its DataSource, committed when the body resolves, rolled back when it throws.
   */
  async plain(meta: TransactionMetadata, call: () => unknown): Promise<unknown> {
    const session = await this.open(await this.target(meta.dataSource), meta);
    try {
      const out = await transactionStorage.run(session, () => Promise.resolve().then(call));
      await this.commit(session);
      return out;
    } catch (err) {
      await this.rollback(session);
      throw err;
    }
  }
}

/** TypeORM's transaction flags, after a COMMIT or ROLLBACK sent on its runner. */
function markEnded(qr: QueryRunner): void {
  const state = qr as unknown as { isTransactionActive: boolean; transactionDepth?: number };
  state.isTransactionActive = false;
  if (typeof state.transactionDepth === 'number') state.transactionDepth = 0;
}
