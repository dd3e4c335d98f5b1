/**
 * A testing kit for crash tests of your own workflows (import from 'nestjs-durable-execution/testing').
 * Arm a named crash point in a worker process of your app, let it die there exactly as a SIGKILL would,
 * hand its runs back at once, resume them in your test's app, and assert nothing ran twice.
 */
import type { INestApplicationContext } from '@nestjs/common';
import { fork } from 'node:child_process';
import type { RunView } from '../interfaces/run.interface';
import { expireCrashedLeases, makeWaitingRunDue } from '../store/test-controls';
import type { CrashPointName } from '../engine/crash-points';
import { Reconciler } from '../maintenance/reconciler.service';
import { DurableWorker } from '../engine/worker.service';
import { RunRepository } from '../api/run.repository';

export type { CrashPointName } from '../engine/crash-points';
export { setPausePointHook } from '../engine/pause-points';
export type { PausePointName, PausePointInfo, PausePointHook } from '../engine/pause-points';
export type { RunCursor, RunStatus, RunView } from '../interfaces/run.interface';

/** Where to crash: a point name, optionally `@<step index>` (e.g. `after-step-commit@3`). */
export type CrashSpec = CrashPointName | `${CrashPointName}@${number}`;

/** Options of `runWorkerUntilCrash`. */
export interface CrashRunOptions {
  /** A script that boots your Nest app with the worker enabled (e.g. `test/worker.ts`). */
  entry: string;
  crashAt: CrashSpec;
  /** Extra environment (database URL, target URLs, ...). */
  env?: Record<string, string>;
  /** Node flags; for a TypeScript entry: `['-r', 'ts-node/register/transpile-only']`. */
  execArgv?: string[];
  /** Give up (and kill the worker) after this long. Default 60 s. */
  timeoutMs?: number;
}

/**
 * Starts a worker process with `DURABLE_CRASH_AT` armed and resolves once it died at that point
 * (SIGKILL, as a deploy or an OOM kill would). Rejects if it exits another way or times out.
 */
export function runWorkerUntilCrash(o: CrashRunOptions): Promise<{ pid: number }> {
  const child = fork(o.entry, [], {
    execArgv: o.execArgv ?? [],
    env: { ...process.env, ...o.env, DURABLE_CRASH_AT: o.crashAt },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(
        new Error(`the worker did not reach crash point ${o.crashAt} within ${o.timeoutMs ?? 60_000} ms`),
      );
    }, o.timeoutMs ?? 60_000);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      if (signal === 'SIGKILL') resolve({ pid: child.pid! });
      else
        reject(
          new Error(`the worker exited (code ${code}, signal ${signal}) before crash point ${o.crashAt}`),
        );
    });
  });
}

/** Options of `releaseCrashedRuns`. */
export interface ReleaseCrashedRunsOptions {
  /**
   * The `worker.workerId` the crashed process was configured with, if your entry sets one. Without
   * it the crashed worker is recognised by its pid in the default id (`host:pid:random`) only.
   */
  workerId?: string | string[];
}

/**
 * Expires the leases a crashed process still holds and runs the reconciler, so its runs are claimable
 * now instead of after the lease TTL. Returns how many runs were handed back. The crashed worker's
 * runs are those whose `worker_id` contains `:<pid>:` (the default id) or equals `options.workerId`:
 * pass the latter when your entry sets `worker.workerId`, else nothing is released.
 */
export async function releaseCrashedRuns(
  app: INestApplicationContext,
  crashed: { pid: number },
  options: ReleaseCrashedRunsOptions = {},
): Promise<number> {
  const ids = options.workerId === undefined ? [] : ([] as string[]).concat(options.workerId);
  const rowCount = await expireCrashedLeases(app, `%:${crashed.pid}:%`, ids);
  await app.get(Reconciler, { strict: false }).sweep();
  return rowCount;
}

/**
 * Drives one run in this process (worker `tick()`s, waiting runs made due at once) until it reaches one
 * of `statuses`. Use with `worker: { enabled: false }` in the test's module options.
 */
export async function driveRun(
  app: INestApplicationContext,
  runId: string,
  statuses: RunView['status'][] = ['succeeded', 'failed', 'cancelled', 'dead_lettered'],
  maxTicks = 100,
): Promise<RunView> {
  const worker = app.get(DurableWorker, { strict: false });
  const runs = app.get(RunRepository, { strict: false });
  for (let i = 0; i < maxTicks; i++) {
    await makeWaitingRunDue(app, runId);
    await worker.tick();
    await worker.idle();
    const run = await runs.get(runId);
    if (run && statuses.includes(run.status)) return run;
  }
  throw new Error(`run ${runId} did not reach ${statuses.join(' / ')} within ${maxTicks} ticks`);
}
