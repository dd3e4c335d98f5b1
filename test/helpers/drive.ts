import { INestApplication } from '@nestjs/common';
import { RunRepository, RunView } from '../../src';
import { DurableWorker } from '../../src/engine/worker.service';
import { TestDatabase } from './database';
import { waitFor } from './processes';

/** Ticks the worker until the run reaches one of `statuses` (making waiting runs due at once). */
export async function driveUntil(
  app: INestApplication,
  db: TestDatabase,
  runId: string,
  statuses: string[] = ['succeeded', 'failed', 'cancelled', 'dead_lettered'],
  maxTicks = 50,
): Promise<RunView> {
  const worker = app.get(DurableWorker);
  const runs = app.get(RunRepository);
  for (let i = 0; i < maxTicks; i++) {
    await db.query(`update ai_runs set available_at = now() where id = $1 and status = 'waiting'`, [runId]);
    await worker.tick();
    await worker.idle();
    const run = (await runs.get(runId))!;
    if (statuses.includes(run.status)) return run;
  }
  throw new Error(`run ${runId} did not reach ${statuses.join('/')} in ${maxTicks} ticks`);
}

/**
 * Ticks the worker (and waits for it to be idle) until the run has `status`, at most `timeoutMs`; unlike
 * `driveUntil`, due times are left as they are (a sleep or a backoff is waited out).
 */
export async function tickUntilStatus(
  app: INestApplication,
  runId: string,
  status: string,
  what = `run ${runId} ${status}`,
  timeoutMs = 15_000,
): Promise<void> {
  const worker = app.get(DurableWorker);
  const runs = app.get(RunRepository);
  await waitFor(
    async () => {
      await worker.tick();
      await worker.idle();
      return (await runs.get(runId))!.status === status;
    },
    timeoutMs,
    what,
  );
}

/** A promise with its resolve handle, for holding a step open. */
export function gate<T = void>(): { promise: Promise<T | undefined>; open: (v?: T) => void } {
  let open!: (v?: T) => void;
  const promise = new Promise<T | undefined>((r) => (open = r));
  return { promise, open };
}

/** Ticks the worker until the run is held for a fixed deploy (non-determinism); throws if it ends first. */
export async function driveUntilHeld(
  app: INestApplication,
  db: TestDatabase,
  runId: string,
  maxTicks = 50,
): Promise<RunView> {
  const worker = app.get(DurableWorker);
  const runs = app.get(RunRepository);
  for (let i = 0; i < maxTicks; i++) {
    await db.query(
      `update ai_runs set available_at = now() where id = $1 and status = 'waiting' and available_at < 'infinity'`,
      [runId],
    );
    await worker.tick();
    await worker.idle();
    const run = (await runs.get(runId))!;
    if (run.status === 'waiting' && run.parkedReason?.startsWith('held for a fixed deploy')) return run;
    if (['succeeded', 'failed', 'cancelled', 'dead_lettered'].includes(run.status))
      throw new Error(`run ${runId} ended ${run.status}, not held`);
  }
  throw new Error(`run ${runId} was not held in ${maxTicks} ticks`);
}

/**
 * Makes a finished run due again from its record (as a new claim after a crash would find it): the
 * next claim replays every recorded call instead of running it.
 */
export async function replayFromRecord(db: TestDatabase, runId: string): Promise<void> {
  await db.query(
    `update ai_runs set status = 'pending', available_at = now(), output = null, finished_at = null where id = $1`,
    [runId],
  );
}
