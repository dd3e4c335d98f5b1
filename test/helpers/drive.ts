import { INestApplication } from '@nestjs/common';
import { RunRepository, RunView } from '../../src';
import { DurableWorker } from '../../src/engine/worker.service';
import { TestDatabase } from './database';

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
