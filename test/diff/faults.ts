/**
 * The fault profile: worker processes (worker.ts) that the test kills with SIGKILL while they hold a
 * run; another one takes the run over once its lease expired (the reconciler hands it on).
 *
 * Where a kill lands (the oracle stays the plain run, unchanged): two units into a step or command that
 * lasts past a takeover, with nothing else scheduled from its call until a takeover's length after the
 * kill. The body run again by the new owner ends at the same virtual time (workflow.ts), and what came
 * due meanwhile is delivered in the order it happened, so the plain run's order must hold.
 */
import { ChildProcess, fork } from 'node:child_process';
import path from 'node:path';
import type { Fault } from './harness';
import type { Rig } from './setup';
import type { PlainResult } from './plain';
import { isMarkMessage, recordMark } from './marks';
import { LATE_CALL_GRACE_MS } from './program';

const pause = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

/** A kill lands this many units into its step; a takeover takes less than TAKEOVER_UNITS. */
export const KILL_AFTER_UNITS = 2;
export const TAKEOVER_UNITS = 8;

export interface WorkerPool {
  /** Starts workers until `n` are live, each ready. */
  fill(n: number): Promise<void>;
  /** SIGKILLs the worker with this id; false when it is not one of the pool's. */
  kill(workerId: string): boolean;
  close(): Promise<void>;
}

export function workerPool(env: { dbUrl: string; worldUrl: string; leaseTtlMs: number }): WorkerPool {
  const live = new Map<string, ChildProcess>();
  let n = 0;
  const spawn = (): Promise<void> => {
    const id = `diff-w${++n}`;
    const child = fork(path.join(__dirname, 'worker.ts'), [], {
      execArgv: ['-r', 'ts-node/register/transpile-only'],
      env: {
        ...process.env,
        DB_URL: env.dbUrl,
        DIFF_WORLD_URL: env.worldUrl,
        WORKER_ID: id,
        LEASE_TTL_MS: String(env.leaseTtlMs),
        HEARTBEAT_MS: String(Math.round(env.leaseTtlMs / 4)),
        LATE_CALL_GRACE_MS: String(LATE_CALL_GRACE_MS),
        DIFF_MARKS_IPC: '1', // catch and finally blocks reported to this process (marks.ts)
      },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    live.set(id, child);
    child.on('message', (m) => isMarkMessage(m) && recordMark(m.runId, m.diffMark));
    child.once('exit', () => live.delete(id));
    return new Promise((resolve, reject) => {
      child.once('message', () => resolve());
      child.once('exit', (code, signal) =>
        reject(new Error(`worker ${id} exited before ready: ${code ?? signal}`)),
      );
    });
  };
  return {
    async fill(count) {
      await Promise.all(Array.from({ length: Math.max(0, count - live.size) }, spawn));
    },
    kill(workerId) {
      const child = live.get(workerId);
      if (!child) return false;
      live.delete(workerId);
      child.kill('SIGKILL');
      return true;
    },
    async close() {
      const exits = [...live.values()].map((c) => new Promise((r) => c.once('exit', r)));
      for (const c of live.values()) c.kill('SIGKILL');
      await Promise.all(exits);
    },
  };
}

export interface Kill {
  /** When (units), in which step or command. */
  at: number;
  label: string;
  /** Timers and timeouts the killed claim registered that come due after the kill. */
  timers: number;
}

/** The kill of a case, or null when no step or command fits. */
export function killWindow(plain: PlainResult): Kill | null {
  const occ = plain.occurrences;
  for (const [label, call] of [...plain.calls].sort((x, y) => x[1].from - y[1].from)) {
    const at = call.from + KILL_AFTER_UNITS;
    const quietUntil = at + TAKEOVER_UNITS;
    if (call.kind === 'child' || call.kind === 'hang' || call.to <= quietUntil) continue; // a child runs in a run of its own
    // A hung body live across the kill would start its attempts afresh on the new owner.
    const hung = [...plain.calls.values()].some(
      (x) => x.kind === 'hang' && x.from < quietUntil && x.to > call.from,
    );
    if (hung) continue;
    const busy = occ.some((o) => !o.what.startsWith('mailbox') && o.time > call.from && o.time <= quietUntil);
    if (busy) continue;
    const timers = occ.filter(
      (o) => /^(sleep|timeout) /.test(o.what) && o.parent !== null && occ[o.parent].time < at && o.time > at,
    ).length;
    return { at, label, timers };
  }
  return null;
}

/** Kills the worker holding the run at `at`; once the run ended, says whether another took over. */
export function killFault(rig: Rig, kill: Kill): Fault {
  const { runs, world, unitMs } = rig.env;
  return async (runId, t0, ended) => {
    await pause(t0 + kill.at * unitMs - Date.now());
    // On a loaded machine the run lags its plan (it may still be parked before the call): wait for the
    // call's body to begin, and kill KILL_AFTER_UNITS into it, as planned, not at the planned clock time.
    const begun = () => world.run(runId).executions.find((x) => x.label === kill.label);
    const waitUntil = Date.now() + 60 * unitMs;
    while (!begun() && !ended() && Date.now() < waitUntil) await pause(Math.max(2, unitMs / 4));
    const body = begun();
    if (body) await pause(body.at + KILL_AFTER_UNITS * unitMs - Date.now());
    const before = (await runs.get(runId))!;
    const killedAt = Date.now();
    if (before.status !== 'running' || !before.workerId || !rig.pool!.kill(before.workerId))
      return [`kill-skipped (run ${before.status}, worker ${before.workerId ?? 'none'})`];
    while (!ended()) await pause(50);
    const after = (await runs.get(runId))!;
    await rig.pool!.fill(2);
    const notes = [`killed ${before.workerId} at ${kill.at} units, in ${kill.label}`];
    if (kill.timers) notes.push(`timers-pending-across-the-kill: ${kill.timers}`);
    // The body the kill cut off, called again by the new owner: how long the takeover took.
    const again = world.run(runId).executions.find((x) => x.label === kill.label && x.at > killedAt);
    if (after.epoch > before.epoch)
      notes.push(
        `takeover (epoch ${before.epoch} → ${after.epoch})${again ? `, ${kill.label} called again ${again.at - killedAt} ms after the kill` : ''}`,
      );
    return notes;
  };
}
