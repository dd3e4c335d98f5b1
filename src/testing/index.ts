/**
 * A testing kit for crash tests of your own workflows (import from 'nestjs-durable-execution/testing').
 * Arm a named crash point in a worker process of your app, let it die there exactly as a SIGKILL would,
 * hand its runs back at once, resume them in your test's app, and assert nothing ran twice.
 */
import type { INestApplicationContext } from '@nestjs/common';
import { fork } from 'node:child_process';
import type { RunView } from '../interfaces/run.interface';
import { advanceDurableClock, expireCrashedLeases, isDueNow, waitLeftOf } from '../store/test-controls';
import { moveRunClock, moveTestClock, testClockOffsetMs } from '../engine/test-clock';
import { fireSchedulesAhead } from './fire-schedule';
import { InvalidArgumentError } from '../errors/invalid-argument.error';
import type { CrashPointName } from '../engine/crash-points';
import { Reconciler } from '../maintenance/reconciler.service';
import { DurableWorker } from '../engine/worker.service';
import { RunRepository } from '../api/run.repository';
import { ReplayChecker, ReplayCheckResult } from '../engine/replay-check';
import type { RunHistory } from '../interfaces/run-history.interface';
import { RunNotFoundError } from '../errors/run-not-found.error';
import { existsSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export type { CrashPointName } from '../engine/crash-points';
export { fireSchedule } from './fire-schedule';
export { setPausePointHook } from '../engine/pause-points';
export type { PausePointName, PausePointInfo, PausePointHook } from '../engine/pause-points';
export type { RunCursor, RunStatus, RunView } from '../interfaces/run.interface';
export type { LimitScope } from '../interfaces/run-reads.interface';

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
 * Drives one run in this process (worker `tick()`s) until it reaches one of `statuses`. A run parked
 * until a time (a sleep, a signal wait with a timeout, a retry's backoff, a model budget's window: that
 * budget's window passes too) has that time skipped for it
 * (as `advanceTestClock` does, for this run only), so a `ctx.sleep(24h)` takes one more tick, not a
 * day, and that run's `ctx.now()` reads that much later from then on (in this process). A run already in
 * one of `statuses` and not due is returned at once (one the caller made due, e.g. by `advanceTestClock`,
 * is driven on). A run waiting for a signal with no timeout, or for an operator,
 * waits for them. Use with
 * `worker: { enabled: false }` in the test's module options.
 */
export async function driveRun(
  app: INestApplicationContext,
  runId: string,
  statuses: RunView['status'][] = ['succeeded', 'failed', 'cancelled', 'dead_lettered'],
  maxTicks = 100,
): Promise<RunView> {
  const worker = app.get(DurableWorker, { strict: false });
  const runs = app.get(RunRepository, { strict: false });
  // Already where it should be and not due (a time the caller advanced on purpose): nothing is driven,
  // no timer fires.
  const already = await runs.get(runId);
  if (already && statuses.includes(already.status) && !(await isDueNow(app, runId))) return already;
  for (let i = 0; i < maxTicks; i++) {
    const left = await waitLeftOf(app, runId);
    if (left > 0) {
      await advanceDurableClock(app, left, runId);
      moveRunClock(runId, left); // what is skipped for the run, its ctx.now() sees
    }
    await worker.tick();
    await worker.idle();
    const run = await runs.get(runId);
    if (run && statuses.includes(run.status)) return run;
  }
  throw new Error(`run ${runId} did not reach ${statuses.join(' / ')} within ${maxTicks} ticks`);
}

/**
 * The test clock (Temporal's time-skipping environment is the model): `ms` of durable time pass at
 * once, against the real PostgreSQL. Every unfinished run's sleeps and signal-wait timeouts come that
 * much closer (runs whose due time has now passed are due: drive them with `driveRun` or
 * `worker.tick()`), every model budget's window moves on by as much (a run parked over budget is due and
 * its call fits when the window has passed), every schedule whose tick the clock passed fires (as the
 * schedule job would at that time: by its `catchUp` policy, so one run for the latest tick by default;
 * the app's `@DurableCron`s are declared first), and `ctx.now()` in this process reads that much later
 * from here on. Leases do not move (a faked database clock would expire every lease), and a worker in
 * another process keeps its own `ctx.now()`. Call `resetTestClock()` between tests (the next skip puts
 * schedules fired ahead back on their next tick after the wall clock). Resolves with how many waiting
 * runs moved.
 * @example
 * ```ts
 * await advanceTestClock(app, 3 * 24 * 3600_000); // the 3-day approval timeout passes
 * expect((await driveRun(app, id)).output).toEqual({ approved: false });
 * ```
 */
export async function advanceTestClock(app: INestApplicationContext, ms: number): Promise<number> {
  if (!Number.isSafeInteger(ms) || ms < 0)
    throw new InvalidArgumentError('ms', `must be an integer number of milliseconds >= 0, got ${String(ms)}`);
  const fromWallClock = testClockOffsetMs() === 0;
  moveTestClock(ms);
  const moved = await advanceDurableClock(app, ms, null);
  await fireSchedulesAhead(app, testClockOffsetMs(), fromWallClock);
  return moved;
}

/** Puts `ctx.now()` of this process back on the wall clock (what the database recorded stays as it is). */
export function resetTestClock(): void {
  moveTestClock('reset');
}

export { HISTORY_FORMAT } from '../interfaces/run-history.interface';
export type { HistoryCheckpoint, HistoryCommand, RunHistory } from '../interfaces/run-history.interface';
export type { ReplayCheckResult } from '../engine/replay-check';

/** What `replayRuns` replays: runs by id, the newest runs of a kind, or exported history documents. */
export interface ReplayRunsOptions {
  /** These runs, as stored now. */
  runIds?: string[];
  /** The newest runs of this kind that are not pending or running. */
  kind?: string;
  /** With `kind`: how many of its newest runs (default 100). */
  limit?: number;
  /** Documents made by `exportRunHistory` or `npx nestjs-durable-execution export`. */
  histories?: RunHistory[];
}

/**
 * The replayer: re-runs recorded runs against this app's workflow code in this process, every step,
 * command, value and wait answered from the record, nothing executed or written, and reports each
 * run that asked for anything else, left a recorded call unasked, or returned another output (byte
 * for byte). Run it in CI against recorded runs before deploying a changed workflow:
 * `expect((await replayRuns(app, { kind: 'triage' })).filter((r) => r.problems.length)).toEqual([])`.
 */
export async function replayRuns(
  app: INestApplicationContext,
  options: ReplayRunsOptions,
): Promise<ReplayCheckResult[]> {
  const checker = app.get(ReplayChecker, { strict: false });
  const out: ReplayCheckResult[] = [];
  for (const id of options.runIds ?? []) out.push(await checker.check(id));
  if (options.kind) out.push(...(await checker.checkKind(options.kind, options.limit)));
  for (const h of options.histories ?? []) out.push(await checker.checkHistory(h));
  return out;
}

/** A run's stored record as one JSON document, for `replayRuns({ histories })` later or elsewhere. */
export async function exportRunHistory(app: INestApplicationContext, runId: string): Promise<RunHistory> {
  const history = await app.get(ReplayChecker, { strict: false }).exportHistory(runId);
  if (!history) throw new RunNotFoundError(runId);
  return history;
}

/**
 * Turns the replay check on for every run this process (and the processes it starts) drives: after
 * each attempt a worker replays the run against its record; `failures()` lists the runs that did not
 * replay (also logged). Call it before the app boots, e.g. in jest's `setupFilesAfterEnv`.
 */
export function enableReplayCheck(
  file = path.join(os.tmpdir(), `durable-replay-check-${process.pid}.jsonl`),
): {
  file: string;
  failures(): ReplayCheckResult[];
} {
  process.env.DURABLE_REPLAY_CHECK = file;
  return {
    file,
    failures: () =>
      existsSync(file)
        ? readFileSync(file, 'utf8')
            .split('\n')
            .filter(Boolean)
            .map((l) => JSON.parse(l) as ReplayCheckResult)
        : [],
  };
}
