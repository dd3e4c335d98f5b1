/**
 * Worker OS processes (the "pods"): spawned from the transpiled example (or through ts-node), ready when they say so over IPC, stopped the
 * way a deployment stops a pod: SIGTERM, then SIGKILL when the grace period is over; or SIGKILL at
 * once, as the OOM killer or a lost node would.
 */
import { ChildProcess, fork } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { WorkerRuntime } from './compile';

export type Side = 'naive' | 'durable';

export interface WorkerHandle {
  name: string;
  side: Side;
  version: number;
  child: ChildProcess;
  /** Code loaded (a deferred worker waits here for `start()`). */
  loaded: Promise<void>;
  /** Boots a deferred worker. */
  start(): void;
  /** Booted and claiming / consuming. */
  ready: Promise<void>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>;
  alive: boolean;
  stoppedWith?: 'SIGTERM' | 'SIGKILL';
  /** When the process ended (ms since epoch). */
  diedAt?: number;
}

const ENTRY: Record<Side, string> = {
  durable: 'examples/purchase-order/worker',
  naive: 'examples/purchase-order/naive/naive-worker',
};

export function spawnWorker(
  runtime: WorkerRuntime,
  side: Side,
  name: string,
  version: number,
  env: object,
  logDir: string,
): WorkerHandle {
  const log = fs.openSync(path.join(logDir, `${name}.log`), 'a');
  const child = fork(runtime.entry(ENTRY[side]), [], {
    execArgv: runtime.execArgv,
    env: { ...process.env, ...runtime.env, DEMO_WORKER: JSON.stringify(env) },
    stdio: ['ignore', log, log, 'ipc'],
  });
  fs.closeSync(log);
  const handle: WorkerHandle = { name, side, version, child, alive: true } as WorkerHandle;
  handle.exited = new Promise((resolve) =>
    child.once('exit', (code, signal) => {
      handle.alive = false;
      handle.diedAt = Date.now();
      resolve({ code, signal, at: handle.diedAt });
    }),
  );
  const onceMessage = (type: string) =>
    new Promise<void>((resolve, reject) => {
      const onMessage = (m: { type?: string }) => {
        if (m?.type !== type) return;
        child.off('message', onMessage);
        resolve();
      };
      child.on('message', onMessage);
      void handle.exited.then((e) =>
        reject(
          new Error(
            `worker ${name} exited before it was ${type} (${e.signal ?? e.code}); see ${logDir}/${name}.log`,
          ),
        ),
      );
    });
  handle.ready = onceMessage('ready');
  handle.loaded = (env as { deferred?: boolean }).deferred ? onceMessage('loaded') : handle.ready;
  handle.start = () => {
    if (child.connected) child.send({ type: 'start' }, undefined, {}, () => undefined); // a dead one shows in `exited`
  };
  handle.loaded.catch(() => undefined);
  handle.ready.catch(() => undefined);
  return handle;
}

/** Stops a worker like a deployment does. Resolves when the process is gone. */
export async function stopWorker(
  w: WorkerHandle,
  how: 'SIGTERM' | 'SIGKILL',
  graceMs: number,
): Promise<void> {
  if (!w.alive) return;
  w.stoppedWith = how;
  w.child.kill(how);
  if (how === 'SIGTERM') {
    const t = setTimeout(() => w.child.kill('SIGKILL'), graceMs);
    await w.exited;
    clearTimeout(t);
  } else {
    await w.exited;
  }
}
