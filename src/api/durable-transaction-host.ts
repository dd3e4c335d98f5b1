import { Injectable } from '@nestjs/common';
import type { PoolClient } from 'pg';
import type { EntityManager } from 'typeorm';
import { CREATE_TABLES_SQL } from '../store/transactions/other-database.sql';
import { currentTransaction, transactionStorage } from '../store/transactions/transaction-session';

/**
 * The transaction of the `@DurableTransaction` body this code runs in, for the services it calls:
 * inject it, and read `manager` (a TypeORM EntityManager: `manager.getRepository(Order)`) or `client`
 * (the pg client, for raw SQL) inside the body. Every statement sent through them is part of the one
 * transaction the step commits in. Read outside such a body, they throw `DurableUsageError`.
 * @example
 * ```ts
 * @Injectable()
 * export class Accounts {
 *   constructor(private readonly tx: DurableTransactionHost) {}
 *   @DurableTransaction()
 *   async activate(id: string) {
 *     await this.tx.manager.getRepository(Account).update(id, { active: true });
 *     return { id };
 *   }
 * }
 * ```
 */
@Injectable()
export class DurableTransactionHost {
  /** The transaction's TypeORM EntityManager. */
  get manager(): EntityManager {
    return currentTransaction('manager').manager;
  }

  /** The transaction's pg client (its connection: do not release it, begin or commit on it). */
  get client(): PoolClient {
    return currentTransaction('client').client;
  }

  /**
   * The DDL of the two tables a durable transaction on another database keeps there (`durable_fences`,
   * `durable_transactions`): created on first use when the role may, else run these in that database
   * (in a migration of the app's own).
   */
  static tablesSql(): string[] {
    return CREATE_TABLES_SQL.split(';\n');
  }

  /** Whether this code runs inside a `@DurableTransaction` body whose transaction is still open. */
  get active(): boolean {
    return transactionStorage.getStore()?.open === true;
  }
}
