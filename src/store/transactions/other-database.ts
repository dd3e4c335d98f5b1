import type { DataSource } from 'typeorm';
import { DurableUsageError } from '../../errors/durable-usage.error';
import { LeaseLostError } from '../../errors/lease-lost.error';
import type { Fence } from '../run-state/fence';
import {
  COMPLETE_SQL,
  FENCE_AND_READ_SQL,
  MISSING_TABLES_SQL,
  CREATE_TABLES_SQL,
  OTHER_DATABASE_TABLES,
} from './other-database.sql';
import { inAbortedTransaction, swallowedStatementError, TransactionSession } from './transaction-session';

/*
 * A durable transaction on another database than the module's (see other-database.sql.ts): the run's
 * fence there, raised first, and a completion row, written last, in the same transaction as the body's
 * writes. The checkpoint in the module's database follows the COMMIT.
 */

/**
 * Another database, first statement: the run's fence raised to this claim's (LeaseLostError when a
 * newer claim raised it further: nothing was written), and the step's completion row if an earlier
 * claim committed it (its output JSON), else null. The tables are created on first use when missing.
 */
export async function fenceOther(
  session: TransactionSession,
  fence: Fence,
  index: number,
): Promise<string | null> {
  const rows = (await session.queryRunner.query(FENCE_AND_READ_SQL, [
    fence.runId,
    fence.timeline ?? 0,
    fence.epoch,
    fence.generation ?? 0,
    index,
  ])) as Array<{ fenced: number; output: string | null }>;
  if (!rows[0].fenced)
    throw new LeaseLostError(fence.runId, fence.epoch, `the fence of ${session.label} in its database`);
  return rows[0].output;
}

/**
 * Another database, last statement before the COMMIT: the completion row. False when an earlier
 * attempt's commit holds it already (23505: read it back; this transaction is rolled back).
 */
export async function completeOther(
  session: TransactionSession,
  fence: Fence,
  index: number,
  name: string,
  fingerprint: string | null,
  outputJson: string,
): Promise<boolean> {
  try {
    await session.queryRunner.query(COMPLETE_SQL, [
      fence.runId,
      fence.timeline ?? 0,
      fence.epoch,
      fence.generation ?? 0,
      index,
      name,
      fingerprint,
      outputJson,
    ]);
    return true;
  } catch (err) {
    if ((err as { code?: string }).code === '23505') return false;
    if (inAbortedTransaction(err)) throw swallowedStatementError(session.label);
    throw err;
  }
}

/** The completion and fence tables of another database: created when missing, or a typed error. */
export async function ensureOtherTables(ds: DataSource, label: string): Promise<void> {
  const missing = ((await ds.query(MISSING_TABLES_SQL, [OTHER_DATABASE_TABLES])) as Array<{ t: string }>).map(
    (r) => r.t,
  );
  if (!missing.length) return;
  try {
    await ds.query(CREATE_TABLES_SQL);
  } catch (err) {
    throw new DurableUsageError(
      `durable transactions on ${label} need the tables ${missing.join(', ')} there, and creating them failed ` +
        `(${(err as Error).message}): run DurableTransactionHost.tablesSql() in that database (a migration of the app's own), ` +
        'or grant CREATE on its schema to the role',
    );
  }
}
