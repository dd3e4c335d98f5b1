import type { INestApplicationContext } from '@nestjs/common';
import { DurableDatabase } from './durable-database';
import type { SqlText } from './durable-names';

/**
 * The testing kit's hand-back of a crashed process's runs: their leases expire now, so the reconciler
 * takes them at once instead of after the lease TTL. A run is the crashed process's when its
 * `worker_id` matches the pattern (the default id holds `:<pid>:`) or is one of the given ids.
 * $1 worker id LIKE pattern, $2 worker ids
 */
export const EXPIRE_CRASHED_LEASES_SQL: SqlText = (
  t,
) => `update ${t.runs} set lease_expires_at = now() - interval '1 millisecond'
      where status = 'running' and (worker_id like $1 or worker_id = any($2::text[]))`;

/**
 * The testing kit's clock skip: a run parked until a time is due now. A run parked until woken (an
 * approval, a signal without timeout: available_at infinity) stays parked. $1 run id
 */
export const MAKE_WAITING_RUN_DUE_SQL: SqlText = (t) =>
  `update ${t.runs} set available_at = now() where id = $1 and status = 'waiting' and available_at < 'infinity'`;

/** Expires the leases of running runs whose worker id is LIKE `workerPattern` or in `workerIds`; how many. @internal */
export async function expireCrashedLeases(
  app: INestApplicationContext,
  workerPattern: string,
  workerIds: string[],
): Promise<number> {
  const { rowCount } = await databaseOf(app).query(EXPIRE_CRASHED_LEASES_SQL, [workerPattern, workerIds]);
  return rowCount;
}

/** Makes run `runId` due now if it is parked until a time. @internal */
export async function makeWaitingRunDue(app: INestApplicationContext, runId: string): Promise<void> {
  await databaseOf(app).query(MAKE_WAITING_RUN_DUE_SQL, [runId]);
}

function databaseOf(app: INestApplicationContext): DurableDatabase {
  return app.get(DurableDatabase, { strict: false });
}
