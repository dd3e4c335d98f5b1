/**
 * The support desk's app processes (http/main.ts), started by the demo as real OS processes: each
 * reports its URL over IPC once it listens; its output goes to a log file of its own. A `deferred` one
 * loads its code and waits for `start()` before it boots (a replacement pod already pulled).
 */
import { ChildProcess, fork } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { Client } from 'pg';
import type { AppRuntime } from './runtime';
import type { TriageSettings } from './triage.tools';

export interface AppProcess {
  name: string;
  child: ChildProcess;
  /** Its code is loaded (a deferred app waits here for `start()`). */
  loaded: Promise<void>;
  /** Boots a deferred app. */
  start(): void;
  /** The app's base URL, once it listens. */
  ready: Promise<string>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  log: string;
}

export function spawnApp(
  runtime: AppRuntime,
  name: string,
  env: { databaseUrl: string; settings: TriageSettings; leaseTtlMs?: number; deferred?: boolean },
  logDir: string,
): AppProcess {
  const log = path.join(logDir, `${name}.log`);
  const fd = fs.openSync(log, 'a');
  const child = fork(runtime.entry('examples/support-triage/http/main'), [], {
    execArgv: runtime.execArgv,
    env: { ...process.env, ...runtime.env, TRIAGE_APP: JSON.stringify({ ...env, workerId: name }) },
    stdio: ['ignore', fd, fd, 'ipc'],
  });
  fs.closeSync(fd);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const message = <T>(type: string) =>
    new Promise<T>((resolve, reject) => {
      child.on('message', (m: { type?: string; url?: string }) => {
        if (m?.type === type) resolve(m.url as T);
      });
      void exited.then((e) =>
        reject(new Error(`${name} exited before it was ${type} (${e.signal ?? e.code}); see ${log}`)),
      );
    });
  const ready = message<string>('ready');
  const loaded = env.deferred ? message<void>('loaded') : ready.then(() => undefined);
  ready.catch(() => undefined);
  loaded.catch(() => undefined);
  const start = () => {
    if (child.connected) child.send({ type: 'start' }, undefined, {}, () => undefined); // a dead one shows in `exited`
  };
  return { name, child, loaded, start, ready, exited, log };
}

/** SIGTERM (the app drains and exits), SIGKILL after `graceMs`. */
export async function stopApp(app: AppProcess, graceMs = 5000): Promise<void> {
  if (app.child.exitCode !== null || app.child.signalCode !== null) return;
  app.child.kill('SIGTERM');
  const t = setTimeout(() => app.child.kill('SIGKILL'), graceMs);
  await app.exited;
  clearTimeout(t);
}

/** Polls `check` every 100 ms until it returns a value, or throws after `timeoutMs`. */
export async function poll<T>(
  check: () => Promise<T | undefined>,
  timeoutMs: number,
  what: string,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const v = await check();
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

/** One statement on a short-lived client. */
export async function queryOnce<T>(url: string, text: string, params: unknown[]): Promise<T[]> {
  const c = new Client({ connectionString: url });
  c.on('error', () => undefined);
  await c.connect();
  try {
    return (await c.query(text, params)).rows as T[];
  } finally {
    await c.end().catch(() => undefined);
  }
}
