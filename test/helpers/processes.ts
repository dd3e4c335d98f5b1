import { ChildProcess, fork } from 'node:child_process';
import path from 'node:path';
import { compiledEntry } from './compiled';

const FIXTURE = path.join(__dirname, '..', 'fixtures', 'worker-app.ts');

/** A worker OS process running test/fixtures/worker-app.ts. */
export interface WorkerProcess {
  child: ChildProcess;
  ready: Promise<void>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export function spawnWorker(env: Record<string, string>, fixture = FIXTURE): WorkerProcess {
  const child = fork(compiledEntry(fixture), [], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const ready = new Promise<void>((resolve, reject) => {
    child.once('message', () => resolve()); // the first message is 'ready'
    void exited.then((e) => reject(new Error(`worker exited before ready: ${JSON.stringify(e)}`)));
  });
  ready.catch(() => undefined);
  return { child, ready, exited };
}

/** Polls `check` until it returns true or `timeoutMs` passes. */
export async function waitFor(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}
